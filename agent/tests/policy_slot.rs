//! The selector's reloadable policy slot in the simulator: a policy replaced between two flows
//! (as a SIGHUP reload does) applies to the second flow only; the first keeps its policy and
//! keeps being controlled.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use ccp_agent::policies::{self, PolicyContext};
use ccp_agent::{Preferences, WithIw};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, Simulation,
};
use ccp_selector::FlowContext;
use ccp_selector::{EventKind, HysteresisConfig, PolicyHandle, Selector, StaticPolicy};

const MS: u64 = 1_000_000;

#[test]
fn a_replaced_policy_applies_to_new_flows_only() {
    let names = ["reno", "cubic", "vegas"];
    let candidates = ccp_algorithms::suite()
        .into_iter()
        .filter(|c| names.contains(&c.name()))
        .collect::<Vec<_>>();
    let order: Vec<&'static str> = candidates.iter().map(|c| c.name()).collect();
    let prefs = Preferences::default();
    let ctx = PolicyContext {
        candidates: &order,
        models: None,
        preferences: &prefs,
        online: None,
    };
    let vegas = policies::build("static:vegas", &ctx).unwrap();
    let handle = PolicyHandle::new(
        Arc::new(|_: &FlowContext<'_>| Box::new(StaticPolicy::default()) as _),
        HysteresisConfig::default(),
    );
    // The first flow's policy is built from `static:cubic`; building it "reloads" the slot
    // with `static:vegas`, so the second flow (started later) gets that.
    let cubic = policies::build("static:cubic", &ctx).unwrap();
    let slot = handle.clone();
    handle.replace(
        Arc::new(move |n: &FlowContext<'_>| {
            slot.replace(vegas.clone(), HysteresisConfig::default(), None);
            cubic(n)
        }),
        HysteresisConfig::default(),
        None,
    );
    let sel = Selector::new(
        candidates,
        Arc::new(|_: &FlowContext<'_>| Box::new(StaticPolicy::default()) as _),
    )
    .with_policy_handle(handle);
    let log = sel.log();
    let agent = LockstepAgent::new(WithIw::new(sel, ccp_agent::IwSource::default()));
    let flow = |start_ns| FlowSpec {
        start_ns,
        ..FlowSpec::bulk(
            Scheme::Ccp {
                alg: "selector".to_string(),
            },
            20 * MS,
        )
    };
    let cfg = SimConfig {
        seed: 3,
        duration_ns: 3_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: 10_000_000 },
            buffer_bytes: 50_000,
            loss: 0.0,
        },
        flows: vec![flow(0), flow(1_000 * MS)],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(agent)).unwrap().run().unwrap();
    assert!(r.flows.iter().all(|f| f.delivered_bytes > 100_000));
    let events = log.events();
    let socks: BTreeSet<u32> = events.iter().map(|e| e.sock_id).collect();
    assert_eq!(socks.len(), 2, "both flows decided");
    let first = *socks.first().unwrap();
    let ran = |sock: u32| -> BTreeSet<&str> {
        events
            .iter()
            .filter(|e| e.sock_id == sock && matches!(e.kind, EventKind::Decision { .. }))
            .map(|e| order[e.from])
            .collect()
    };
    assert_eq!(ran(first), BTreeSet::from(["cubic"]));
    assert_eq!(ran(*socks.last().unwrap()), BTreeSet::from(["vegas"]));
    // The first flow kept reporting after the second one started.
    let last_first_us = events
        .iter()
        .filter(|e| e.sock_id == first)
        .map(|e| e.time_us)
        .max()
        .unwrap();
    assert!(
        last_first_us > 2_000_000,
        "first flow went silent at {last_first_us} µs"
    );
}
