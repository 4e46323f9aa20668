//! `iw.kernel_cgroup`: the IW table for real kernel TCP connections (TCP-RL's deployment: the
//! table is consulted when a connection starts).
//!
//! At start the agent creates the cgroup v2 `iw.kernel_cgroup`, attaches `ccp-datapath`'s
//! sockops program to it ([`ccp_datapath::kernel::SockOps`]) and publishes the table there:
//! each TCP connection whose socket belongs to that cgroup (created by a process in it, or
//! accepted from a listener created in it) gets, before its first data segment, the IW of its
//! peer's address (`TCP_BPF_IW`, packets) and, with `iw.kernel_cca`, that congestion control.
//! Every IPv4 peer in no range of the table gets `iw.default_iw` (a `/0` entry), as flows through
//! the CCP datapath do; IPv6 peers keep the kernel's IW. The kernel side clamps IWs to
//! [`ccp_datapath::kernel::sockops::MAX_IW_PKTS`] (1000).
//!
//! SIGHUP republishes the new table (and `kernel_cca`); a table the kernel does not take fails
//! the reload, the previous table is written back and stays. The cgroup is read at start only.
//! On SIGTERM / SIGINT the agent detaches the program, moves the cgroup's processes to its
//! parent, removes the cgroup and exits 0; after a SIGKILL the program detaches with the
//! process (a BPF link) and the next start replaces the stale cgroup.
//!
//! Needs Linux, the cargo feature `kernel` of `ccp-agent` and root (or `CAP_BPF` +
//! `CAP_NET_ADMIN`); without them a configured `kernel_cgroup` is an error at start.

use std::path::PathBuf;

use iw_controller::IwTable;

/// The IW table as `SockOps::publish_iw` takes it: `(first, last (inclusive), IW packets)`,
/// host-order addresses. The whole IPv4 space with the default IW comes first; the table's
/// ranges follow (a longer prefix, or a later identical one, wins in the kernel's table).
/// `None`: no table, no entries (the kernel's own IW).
pub fn kernel_ranges(table: Option<&IwTable>) -> Vec<(u32, u32, u32)> {
    let Some(table) = table else {
        return Vec::new();
    };
    std::iter::once((0, u32::MAX, table.default_iw()))
        .chain(
            table
                .ranges()
                .map(|(s, e, iw)| (u32::from(s), u32::from(e), iw)),
        )
        .collect()
}

/// Why the kernel IW table cannot be attached or published.
#[derive(Debug, thiserror::Error)]
#[error("iw.kernel_cgroup {}: {message}", cgroup.display())]
pub struct KernelIwError {
    /// The configured cgroup.
    pub cgroup: PathBuf,
    /// What failed.
    pub message: String,
}

#[cfg(all(feature = "kernel", target_os = "linux"))]
mod imp {
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, PoisonError};

    use ccp_datapath::kernel::{KernelError, SockOps};
    use iw_controller::IwTable;
    use tracing::{info, warn};

    use super::{KernelIwError, kernel_ranges};

    /// What is in the kernel now.
    #[derive(Debug)]
    struct Attached {
        sockops: SockOps,
        ranges: Vec<(u32, u32, u32)>,
        cca: Option<String>,
    }

    /// The sockops program on `iw.kernel_cgroup` and the table published there.
    #[derive(Debug)]
    pub struct KernelIw {
        cgroup: PathBuf,
        slot: Mutex<Option<Attached>>,
    }

    fn write(
        so: &mut SockOps,
        ranges: &[(u32, u32, u32)],
        cca: Option<&str>,
    ) -> Result<usize, KernelError> {
        let n = so.publish_iw(ranges)?;
        match cca {
            Some(name) => so.set_cca_policy(0, name)?,
            None => so.clear_cca_policy(0)?,
        }
        Ok(n)
    }

    impl KernelIw {
        /// Creates `cgroup` (replacing a stale one), attaches the program and publishes
        /// `table` and `cca`.
        pub fn attach(
            cgroup: &Path,
            table: &IwTable,
            cca: Option<&str>,
        ) -> Result<Self, KernelIwError> {
            let err = |e: &KernelError| KernelIwError {
                cgroup: cgroup.to_path_buf(),
                message: if e.is_unavailable() {
                    format!(
                        "{e} (needs root or CAP_BPF + CAP_NET_ADMIN, BPF sockops and cgroup v2)"
                    )
                } else {
                    e.to_string()
                },
            };
            let mut sockops = SockOps::attach(cgroup).map_err(|e| err(&e))?;
            let ranges = kernel_ranges(Some(table));
            let n = write(&mut sockops, &ranges, cca).map_err(|e| err(&e))?;
            info!(
                cgroup = %sockops.cgroup_path().display(),
                prog_id = sockops.prog_id(),
                prefixes = n,
                cca = cca.unwrap_or("(system default)"),
                "sockops attached; IW table published to the kernel"
            );
            Ok(Self {
                cgroup: sockops.cgroup_path().to_path_buf(),
                slot: Mutex::new(Some(Attached {
                    sockops,
                    ranges,
                    cca: cca.map(str::to_string),
                })),
            })
        }

        /// Replaces the published table (`None`: no entries) and CCA. On failure the previous
        /// ones are written back and the error returned.
        pub fn publish(
            &self,
            table: Option<&IwTable>,
            cca: Option<&str>,
        ) -> Result<usize, KernelIwError> {
            let err = |message: String| KernelIwError {
                cgroup: self.cgroup.clone(),
                message,
            };
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(a) = slot.as_mut() else {
                return Err(err("detached (the agent is stopping)".into()));
            };
            let ranges = kernel_ranges(table);
            match write(&mut a.sockops, &ranges, cca) {
                Ok(n) => {
                    info!(
                        cgroup = %self.cgroup.display(),
                        prefixes = n,
                        cca = cca.unwrap_or("(system default)"),
                        "IW table republished to the kernel"
                    );
                    a.ranges = ranges;
                    a.cca = cca.map(str::to_string);
                    Ok(n)
                }
                Err(e) => {
                    let (old, old_cca) = (a.ranges.clone(), a.cca.clone());
                    if let Err(back) = write(&mut a.sockops, &old, old_cca.as_deref()) {
                        warn!(
                            cgroup = %self.cgroup.display(),
                            error = %back,
                            "could not restore the previous kernel IW table"
                        );
                    }
                    Err(err(e.to_string()))
                }
            }
        }

        /// Detaches the program and removes the cgroup (its processes move to the parent).
        pub fn detach(&self) {
            let taken = self
                .slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if taken.is_some() {
                drop(taken);
                info!(cgroup = %self.cgroup.display(), "sockops detached, cgroup removed");
            }
        }

        /// The cgroup, as resolved under the cgroup v2 mount.
        pub fn cgroup(&self) -> &Path {
            &self.cgroup
        }
    }
}

#[cfg(not(all(feature = "kernel", target_os = "linux")))]
mod imp {
    use std::path::{Path, PathBuf};

    use iw_controller::IwTable;

    use super::KernelIwError;

    /// Stand-in without the `kernel` feature: attaching always fails.
    #[derive(Debug)]
    pub struct KernelIw {
        cgroup: PathBuf,
    }

    impl KernelIw {
        /// Always an error: this build has no kernel support.
        pub fn attach(
            cgroup: &Path,
            _table: &IwTable,
            _cca: Option<&str>,
        ) -> Result<Self, KernelIwError> {
            Err(KernelIwError {
                cgroup: cgroup.to_path_buf(),
                message: "this ccp-agent is built without kernel support (Linux, cargo feature \
                          `kernel`)"
                    .into(),
            })
        }

        /// Never reached (no value exists).
        pub fn publish(
            &self,
            _table: Option<&IwTable>,
            _cca: Option<&str>,
        ) -> Result<usize, KernelIwError> {
            Ok(0)
        }

        /// Nothing to detach.
        pub fn detach(&self) {}

        /// The configured cgroup.
        pub fn cgroup(&self) -> &Path {
            &self.cgroup
        }
    }
}

pub use imp::KernelIw;

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn ranges_are_host_order_after_the_default() {
        assert!(kernel_ranges(None).is_empty());
        let t = IwTable::new(
            vec![
                (
                    Ipv4Addr::new(127, 0, 0, 0),
                    Ipv4Addr::new(127, 255, 255, 255),
                    7,
                ),
                (Ipv4Addr::new(10, 0, 0, 0), Ipv4Addr::new(10, 0, 0, 255), 30),
            ],
            10,
            100,
        )
        .unwrap();
        assert_eq!(
            kernel_ranges(Some(&t)),
            vec![
                (0, u32::MAX, 10),
                (0x0a00_0000, 0x0a00_00ff, 30),
                (0x7f00_0000, 0x7fff_ffff, 7),
            ]
        );
    }
}
