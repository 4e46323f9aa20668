//! A binary of this crate (`ccp-agent`, `ccp-kernel-datapath`) as a child process of a test:
//! spawn, signal, watch its log.

pub(crate) mod learning;
pub(crate) mod runtime;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The agent process; stopped on drop (SIGTERM, so an agent with a kernel cgroup removes it;
/// SIGKILL after 2 s), its socket file removed. Its stderr lines are collected.
pub(crate) struct Agent {
    /// The process (tests may wait on it).
    pub(crate) child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
    pub(crate) sock: PathBuf,
}

impl Agent {
    /// Starts `ccp-agent --ipc unix --alg <alg> --name <name> --config <config>`.
    #[allow(dead_code)]
    pub(crate) fn spawn(alg: &str, config: &Path, name: &str) -> Self {
        let config = config.to_string_lossy();
        Self::spawn_program(
            Path::new(env!("CARGO_BIN_EXE_ccp-agent")),
            &[
                "--ipc", "unix", "--alg", alg, "--name", name, "--config", &config,
            ],
            name,
            "agent",
        )
    }

    /// Starts `program` with `args`; it binds `/tmp/ccp/<sock_name>` (removed on drop). Its
    /// stderr lines are echoed with `tag` and collected.
    #[allow(dead_code)]
    pub(crate) fn spawn_program(program: &Path, args: &[&str], sock_name: &str, tag: &str) -> Self {
        let child = Command::new(program)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut agent = Self::adopt(child, tag);
        agent.sock = Path::new("/tmp/ccp").join(sock_name);
        agent
    }

    /// Takes over a started `child` whose stderr is piped (echoed with `tag` and collected);
    /// it has no unix socket to remove.
    #[allow(dead_code)]
    pub(crate) fn adopt(mut child: Child, tag: &str) -> Self {
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        let tag = tag.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("{tag}: {line}");
                lines.lock().unwrap().push(line);
            }
        });
        Self {
            child,
            stderr,
            sock: PathBuf::new(),
        }
    }

    /// Waits until the agent has bound its socket.
    #[allow(dead_code)]
    pub(crate) fn wait_bound(&self) {
        let start = Instant::now();
        while !self.sock.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "agent never bound {}",
                self.sock.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `sig` to the agent.
    pub(crate) fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Waits until `n` stderr lines contain `needle` and returns the last such line, or the
    /// agent's exit status if it exits first.
    pub(crate) fn wait_for_line(&mut self, needle: &str, n: usize) -> Result<String, ExitStatus> {
        let start = Instant::now();
        loop {
            let found: Vec<String> = self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(needle))
                .cloned()
                .collect();
            if found.len() >= n {
                return Ok(found.last().cloned().unwrap());
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread collect the last lines: the line may have been written
                // just before the exit, after the look above.
                std::thread::sleep(Duration::from_millis(100));
                let found: Vec<String> = self
                    .stderr
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|l| l.contains(needle))
                    .cloned()
                    .collect();
                if found.len() >= n {
                    return Ok(found.last().cloned().unwrap());
                }
                return Err(status);
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "agent never logged {needle:?} x{n}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the agent logged so far.
    #[allow(dead_code)]
    pub(crate) fn log(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: signalling our own child (SIGTERM; a reaped pid is not reused before wait).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(2) {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.sock.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.sock);
        }
    }
}

/// The `key=value` words of a log line whose values are numbers (the agent's counters).
#[allow(dead_code)] // each test binary uses a part of `common`
pub(crate) fn fields(line: &str) -> std::collections::BTreeMap<String, u64> {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}
