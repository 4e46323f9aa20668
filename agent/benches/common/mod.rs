//! Shared by the benches: the crate's binaries as child processes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// A child process bound to `/tmp/ccp/<name>`; killed on drop.
pub(crate) struct Proc(Child, PathBuf);

impl Proc {
    pub(crate) fn spawn(program: &str, args: &[&str], sock: &str, log: &str) -> BoxResult<Self> {
        let child = Command::new(program)
            .args(args)
            .env("RUST_LOG", log)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let sock = Path::new("/tmp/ccp").join(sock);
        let mut me = Self(child, sock);
        let start = Instant::now();
        while !me.1.exists() {
            if let Some(status) = me.0.try_wait()? {
                return Err(format!("{program} exited with {status}").into());
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(format!("{program} never bound {}", me.1.display()).into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(me)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// User + system CPU time of the process so far, seconds.
    pub(crate) fn cpu_s(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).unwrap_or_default();
        // Fields after the parenthesized command name: utime is the 12th, stime the 13th.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<u64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        ticks as f64 / clock_ticks()
    }

    pub(crate) fn terminate(mut self) -> BoxResult<()> {
        let pid = libc::pid_t::try_from(self.0.id())?;
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let start = Instant::now();
        while self.0.try_wait()?.is_none() {
            if start.elapsed() > Duration::from_secs(5) {
                return Err("process did not stop on SIGTERM".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub(crate) fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}
