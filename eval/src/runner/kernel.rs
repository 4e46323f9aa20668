//! `run --datapath kernel`: a job's [`ccp_datapath::netem::NetworkSpec`] on the kernel
//! testbed ([`KernelNetwork`]) instead of the simulator, with the same rows, series, swaps
//! and report. CCP schemes and selectors are driven by a portus agent with every scheme
//! registered, in this process over portus's channel IPC; runs are sequential and real time.
//! What the testbed measures differently, and what it refuses, is said in
//! `ccp_datapath::kernel::testbed::KernelNetwork`'s module.

use ccp_datapath::kernel::testbed::KernelNetwork;
use ccp_datapath::runtime::ChannelTransport;

use super::{Job, JobOutput, flows_port, plan_network};
use crate::scenario::{Condition, Scenario};
use crate::schemes;

/// Runs one job on the testbed.
pub(super) fn execute(
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
) -> Result<JobOutput, String> {
    let planned = plan_network(scenario, cond, job);
    if !planned.needs_agent() {
        return planned.run_on(KernelNetwork::new(), scenario, cond, job, None);
    }
    let (transport, agent_end) = ChannelTransport::pair(None);
    let (handle, selectors) = schemes::spawn_channel_agent(agent_end, flows_port(scenario, cond))
        .map_err(|e| format!("starting the agent: {e:?}"))?;
    let out = planned.run_on(
        KernelNetwork::new().with_agent(transport),
        scenario,
        cond,
        job,
        Some(&selectors),
    );
    handle.kill();
    let _ = handle.wait();
    out
}
