//! The starting corpora: real messages and the repository's own files, cut to the fuzzer's
//! input size.
//!
//! - `wire`, `datapath`: INSTALL of every datapath program of the built-in registry, compiled and
//!   serialized by portus, with portus's CHANGE_PROG and UPDATE_FIELD for them;
//! - `agent_guard`: READY, CREATE (with and without an algorithm name) and MEASURE as the
//!   datapath runtime encodes them (libccp's layout);
//! - `scenario`, `agent_config`, `trace`, `iw_table`: the scenario files of `eval/scenarios`,
//!   `agent/agent.example.toml`, the head of each trace of `eval/traces`, `agent/iw.example.csv`;
//! - `model`: a manifest as `ModelSet::save` writes it, naming one small booster fitted here.
//!
//! The `fuzz-seeds` binary writes them to `fuzz/fuzz/corpus/<target>/`; the corpus replay test
//! runs them too, so they stay valid inputs as the formats change.

use std::path::{Path, PathBuf};

use ccp_datapath::runtime::FlowInfo;
use ccp_datapath::runtime::wire;
use forust_ml::{GradientBooster, Matrix};
use portus::lang::{Reg, Type};
use portus::serialize::{changeprog, install, serialize, update_field};

/// One seed: its target, a file name, the bytes.
#[derive(Debug, Clone)]
pub struct Seed {
    /// The target's name (an entry of [`crate::TARGETS`]).
    pub target: &'static str,
    /// File name in the corpus folder.
    pub name: String,
    /// The input.
    pub bytes: Vec<u8>,
}

/// The repository root (this crate is `fuzz/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Where cargo-fuzz keeps `target`'s corpus.
pub fn corpus_dir(target: &str) -> PathBuf {
    repo_root().join("fuzz/fuzz/corpus").join(target)
}

/// Why a seed could not be built.
#[derive(Debug)]
pub struct SeedError(pub String);

impl std::fmt::Display for SeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SeedError {}

fn err<E: std::fmt::Debug>(what: &str) -> impl Fn(E) -> SeedError + '_ {
    move |e| SeedError(format!("{what}: {e:?}"))
}

/// INSTALL (uid as portus assigns it), a CHANGE_PROG to it for flow `sid` and an
/// UPDATE_FIELD of its first control register, for one program's `source`.
fn program_messages(source: &str, sid: u32) -> Result<[Vec<u8>; 3], SeedError> {
    let (bin, scope) = portus::lang::compile(source.as_bytes(), &[]).map_err(err("compile"))?;
    let uid = scope.program_uid;
    let ins = serialize(&install::Msg {
        sid: 0,
        program_uid: uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    })
    .map_err(err("install"))?;
    let change = serialize(&changeprog::Msg {
        sid,
        program_uid: uid,
        num_fields: 1,
        fields: vec![(Reg::Implicit(4, Type::Num(None)), 14_480)],
    })
    .map_err(err("changeprog"))?;
    let update = serialize(&update_field::Msg {
        sid,
        num_fields: 2,
        fields: vec![
            (Reg::Implicit(4, Type::Num(None)), 28_960),
            (Reg::Control(0, Type::Num(None), false), 7),
        ],
    })
    .map_err(err("update_field"))?;
    Ok([ins, change, update])
}

/// Measurements for the `datapath` target: `n` ACKs of a flow in steady state.
fn prims_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n as u32 {
        let mut p = Vec::with_capacity(crate::PRIMS_LEN);
        p.extend(1448u32.to_le_bytes()); // bytes_acked
        p.extend(1u32.to_le_bytes()); // packets_acked
        p.extend(0u32.to_le_bytes()); // bytes_misordered
        p.extend([0, u8::from(i % 7 == 3), u8::from(i % 11 == 5), 0]);
        p.extend((20_000 + 100 * i).to_le_bytes()); // rtt µs
        p.extend(12_500_000u64.to_le_bytes()); // rate out
        p.extend(12_000_000u64.to_le_bytes()); // rate in
        p.extend((20 * 1448u32).to_le_bytes()); // in flight
        p.extend((30 * 1448u32).to_le_bytes()); // cwnd
        p.extend((i * 1000).to_le_bytes()); // rate / pending; last byte is the clock step
        p[crate::PRIMS_LEN - 1] = 10;
        out.extend(p);
    }
    out
}

fn with_len_prefix(first: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut v = (first.len().min(usize::from(u16::MAX)) as u16)
        .to_le_bytes()
        .to_vec();
    v.extend(first);
    v.extend(rest);
    v
}

fn seed(target: &'static str, name: impl Into<String>, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name: name.into(),
        bytes,
    }
}

/// The first `lines` lines of the file at `rel` (from the repository root).
fn head(rel: &str, lines: usize) -> Result<Vec<u8>, SeedError> {
    let text = std::fs::read_to_string(repo_root().join(rel))
        .map_err(|e| SeedError(format!("{rel}: {e}")))?;
    let mut out = String::new();
    for l in text.lines().take(lines) {
        out.push_str(l);
        out.push('\n');
    }
    Ok(out.into_bytes())
}

/// A booster of two depth-2 trees over the model features, as JSON.
fn small_booster() -> Result<String, SeedError> {
    let n = 32;
    let features = 7;
    let mut data = vec![0.0; n * features];
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        for j in 0..features {
            data[j * n + i] = ((i * (j + 3)) % 17) as f64;
        }
        y.push((i % 5) as f64 / 4.0);
    }
    let matrix = Matrix::new(&data, n, features);
    let mut b = GradientBooster::default()
        .set_missing(-1.0)
        .set_iterations(2)
        .set_max_depth(2)
        .set_parallel(false)
        .set_seed(0);
    b.fit_unweighted(&matrix, &y, None)
        .map_err(|e| SeedError(format!("booster: {e}")))?;
    b.json_dump()
        .map_err(|e| SeedError(format!("booster json: {e}")))
}

/// The model manifest as `ModelSet::save` writes it (format, versions, features), every
/// listed model being `m.json`.
fn manifest(candidates: &[&str]) -> String {
    let names: Vec<String> = candidates
        .iter()
        .map(|c| format!("\"{c}\": \"m.json\""))
        .collect();
    let counts: Vec<String> = candidates.iter().map(|c| format!("\"{c}\": 32")).collect();
    format!(
        r#"{{"format":"antelope-models","format_version":1,"objective":"antelope","feature_schema":1,
"features":["avg_srtt_ms","acks","lost_pkts","build_ms","max_pacing_kbps","send_rate_kbps","min_delay_ms"],
"acks_per_unit":20,"start_candidate":"reno","trees":2,"depth":2,
"models":{{"default":{{{n}}},"delay":{{{n}}}}},"samples":{{"default":{{{c}}},"delay":{{{c}}}}}}}"#,
        n = names.join(","),
        c = counts.join(",")
    )
}

/// Every seed of every target.
pub fn all() -> Result<Vec<Seed>, SeedError> {
    let mut out = Vec::new();
    // Programs of the built-in algorithms, through portus's compiler and serializer.
    let registry = ccp_algorithms::Registry::builtin();
    let mut all_msgs = Vec::new();
    for spec in registry.programs() {
        let [ins, change, update] = program_messages(spec.source, 1)?;
        out.push(seed("wire", format!("install-{}", spec.name), ins.clone()));
        let mut both = ins.clone();
        both.extend(&change);
        both.extend(&update);
        out.push(seed(
            "wire",
            format!("install-change-update-{}", spec.name),
            both.clone(),
        ));
        out.push(seed(
            "datapath",
            format!("run-{}", spec.name),
            with_len_prefix(&both, &prims_bytes(24)),
        ));
        all_msgs.extend(ins);
    }
    out.push(seed("wire", "every-install", all_msgs));
    // What the datapath sends, as the runtime encodes it (the agent's input).
    let mut ready = Vec::new();
    wire::encode_ready(&mut ready, 7);
    out.push(seed("agent_guard", "ready", ready));
    for (name, alg) in [
        ("create", None),
        ("create-cubic", Some("cubic".to_string())),
    ] {
        let mut create = Vec::new();
        let info = FlowInfo {
            init_cwnd_bytes: 14_480,
            mss_bytes: 1448,
            src_ip: 0x0a00_0001,
            src_port: 40_000,
            dst_ip: 0x0a00_0002,
            dst_port: 443,
            alg,
        };
        wire::encode_create(&mut create, 1, &info);
        out.push(seed("agent_guard", name, create));
    }
    for fields in [0usize, 1, 6, 16] {
        let mut m = Vec::new();
        let values: Vec<u64> = (0..fields as u64).map(|i| i * 1000 + 1).collect();
        wire::encode_measure(&mut m, 1, 3, &values);
        out.push(seed("agent_guard", format!("measure-{fields}"), m));
    }
    // The repository's own files.
    let scenarios = repo_root().join("eval/scenarios");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&scenarios)
        .map_err(|e| SeedError(format!("{}: {e}", scenarios.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    for p in names {
        let bytes = std::fs::read(&p).map_err(|e| SeedError(format!("{}: {e}", p.display())))?;
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        out.push(seed("scenario", stem.unwrap_or_default(), bytes));
    }
    out.push(seed(
        "scenario",
        "cellular",
        head("examples/custom-cca/cellular.toml", 400)?,
    ));
    out.push(seed(
        "agent_config",
        "example",
        head("agent/agent.example.toml", 400)?,
    ));
    out.push(seed(
        "trace",
        "att-lte",
        head("eval/traces/ATT-LTE-driving-2016.down", 200)?,
    ));
    out.push(seed(
        "trace",
        "tmobile-lte",
        head("eval/traces/TMobile-LTE-short.down", 200)?,
    ));
    out.push(seed(
        "iw_table",
        "example",
        head("agent/iw.example.csv", 100)?,
    ));
    let booster = small_booster()?;
    for (name, candidates) in [
        ("one", &["reno"][..]),
        ("three", &["reno", "cubic", "bbr"][..]),
    ] {
        out.push(seed(
            "model",
            name,
            with_len_prefix(manifest(candidates).as_bytes(), booster.as_bytes()),
        ));
    }
    Ok(out)
}
