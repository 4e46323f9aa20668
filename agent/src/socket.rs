//! The unix socket's name and path: `--name` is one file name inside [`SOCKET_DIR`], and a
//! running agent's socket is never taken over.
//!
//! portus's unix socket binds `/tmp/ccp/<name>` after unlinking whatever is there, so a name
//! with `/` or `..` would place (and first delete) a file elsewhere, and a second agent with
//! the same name would silently steal the first one's datapaths. [`claim`] runs before portus
//! binds:
//! - the name must be 1 to [`MAX_NAME_LEN`] bytes of `A-Z a-z 0-9 . _ -`, and not `.` or `..`;
//! - if the path exists and is a socket some process is bound to (a datagram `connect`
//!   succeeds, or finds a live socket of another type: `--ipc shm` listens on a stream
//!   socket), the agent refuses to start; a socket nobody is bound to (connection refused)
//!   is stale and portus replaces it; anything else there (a file, a folder, a symlink) is
//!   refused.
//!
//! Two agents started at the same instant can still both see no live socket before either
//! binds; the check guards against the common case, an agent already running.

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

/// Where portus binds unix sockets.
pub const SOCKET_DIR: &str = "/tmp/ccp";
/// Longest socket name, bytes (well inside `sun_path`'s 108 with the folder).
pub const MAX_NAME_LEN: usize = 64;

/// Why the agent cannot bind its unix socket.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// `--name` is not a single safe file name.
    #[error(
        "--name {0:?}: must be 1 to {MAX_NAME_LEN} of A-Z a-z 0-9 . _ - and not \".\" or \"..\""
    )]
    BadName(String),
    /// Another agent is bound there.
    #[error("{}: another process is bound to this socket (a running agent?); not replacing it", .0.display())]
    InUse(PathBuf),
    /// Something other than a socket is there.
    #[error("{}: exists and is not a socket; not replacing it", .0.display())]
    NotASocket(PathBuf),
    /// The path cannot be inspected.
    #[error("{}: {source}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// Checks `name` (see the module doc).
pub fn validate_name(name: &str) -> Result<(), SocketError> {
    let safe = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-');
    if name.is_empty()
        || name.len() > MAX_NAME_LEN
        || name == "."
        || name == ".."
        || !name.bytes().all(safe)
    {
        return Err(SocketError::BadName(name.to_string()));
    }
    Ok(())
}

/// Validates `name` and checks that `SOCKET_DIR/<name>` is free or a stale socket; returns
/// the path. See the module doc.
pub fn claim(name: &str) -> Result<PathBuf, SocketError> {
    validate_name(name)?;
    let path = Path::new(SOCKET_DIR).join(name);
    check_free(&path)?;
    Ok(path)
}

/// Whether `path` may be (re)bound: absent, or a socket nobody is bound to.
pub fn check_free(path: &Path) -> Result<(), SocketError> {
    let io = |source| SocketError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket(path.to_path_buf()));
    }
    let probe = UnixDatagram::unbound().map_err(io)?;
    match probe.connect(path) {
        Ok(()) => Err(SocketError::InUse(path.to_path_buf())),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => Ok(()),
        // A live socket of another type (`--ipc shm` listens on a stream socket).
        Err(e) if e.raw_os_error() == Some(libc::EPROTOTYPE) => {
            Err(SocketError::InUse(path.to_path_buf()))
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn names_are_one_safe_component() {
        for ok in [
            "portus",
            "agent-1",
            "a.b_c",
            "..a",
            &"x".repeat(MAX_NAME_LEN),
        ] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../../etc/x",
            "a/b",
            "/abs",
            "sp ace",
            "nul\0",
            "ünï",
            "new\nline",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            let e = validate_name(bad).unwrap_err();
            assert!(matches!(e, SocketError::BadName(_)), "{bad:?}");
        }
    }

    #[test]
    fn a_live_socket_is_refused_a_stale_one_is_free_anything_else_refused() {
        let dir = std::env::temp_dir().join(format!("ccp-agent-socket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let _ = std::fs::remove_file(&path);
        assert!(check_free(&path).is_ok(), "absent");

        let live = UnixDatagram::bind(&path).unwrap();
        let e = check_free(&path).unwrap_err();
        assert!(matches!(e, SocketError::InUse(_)), "{e}");
        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
        drop(live);
        assert!(check_free(&path).is_ok(), "stale: nobody bound");

        std::fs::remove_file(&path).unwrap();
        // A live stream socket (an agent with `--ipc shm`) is in use too.
        let live = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(matches!(check_free(&path), Err(SocketError::InUse(_))));
        drop(live);
        assert!(check_free(&path).is_ok(), "stale stream socket");

        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "not a socket").unwrap();
        assert!(matches!(check_free(&path), Err(SocketError::NotASocket(_))));
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/nonexistent", &path).unwrap();
        assert!(matches!(check_free(&path), Err(SocketError::NotASocket(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
