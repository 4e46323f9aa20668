//! ONNX Runtime for the whole suite, loaded once per process: the library lookup, the one
//! environment, the session settings and the shape check that every model loader uses (ARC's
//! actor here, the selector's `onnx` and `tcprl` policies in `ccp-selector`).
//!
//! `ort` is built with `load-dynamic`: `libonnxruntime.so` is opened at run time, once per
//! process. [`resolve_library`] finds it: `ORT_DYLIB_PATH` if set, else
//! `onnxruntime/capi/libonnxruntime.so*` under `.venv/lib/python3*/site-packages/` of the current
//! directory or one of its ancestors, else of the workspace the crate was built in (the
//! workspace `.venv` that `make venv` fills from the pinned `onnxruntime` wheel from the Python
//! package index). A missing or unloadable library is
//! a [`RuntimeError`], never a panic.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use ort;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::{TensorElementType, ValueType};

/// Environment variable naming the ONNX Runtime shared library.
pub const DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// Why ONNX Runtime could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    /// No ONNX Runtime shared library was found.
    #[error(
        "ONNX Runtime library not found (searched: {searched}); set {DYLIB_ENV} to \
         libonnxruntime.so or run `make venv`"
    )]
    LibraryNotFound {
        /// The paths or patterns that were tried.
        searched: String,
    },
    /// The library was found but could not be loaded (not a library, wrong version...).
    #[error("cannot load ONNX Runtime from {path}: {reason}")]
    LibraryLoad {
        /// The library file.
        path: PathBuf,
        /// What the loader said.
        reason: String,
    },
    /// The current directory could not be read (for the `.venv` search).
    #[error("cannot read the current directory: {0}")]
    CurrentDir(String),
    /// A thread panicked while loading the runtime (the lock is poisoned).
    #[error("the ONNX Runtime lock is poisoned")]
    Poisoned,
}

/// The library path to use: `explicit`, else `ORT_DYLIB_PATH`, else the workspace `.venv`
/// (see the module docs). Checks only that the file exists.
pub fn resolve_library(explicit: Option<&Path>) -> Result<PathBuf, RuntimeError> {
    if let Some(p) = explicit {
        return existing(p, format!("{} (explicit)", p.display()));
    }
    if let Some(p) = std::env::var_os(DYLIB_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return existing(&p, format!("{}={}", DYLIB_ENV, p.display()));
    }
    let mut searched = String::new();
    let cwd = std::env::current_dir().map_err(|e| RuntimeError::CurrentDir(e.to_string()))?;
    for dir in venv_homes(&cwd) {
        let lib = dir.join(".venv").join("lib");
        let _ = write!(
            searched,
            "{}/python3*/site-packages/onnxruntime/capi/libonnxruntime.so*; ",
            lib.display()
        );
        if let Some(found) = find_in_venv(&lib) {
            return Ok(found);
        }
    }
    Err(RuntimeError::LibraryNotFound {
        searched: format!("{DYLIB_ENV} unset; {searched}"),
    })
}

/// Where a `.venv` is looked for, in order: `cwd` and its ancestors, then the workspace this
/// crate was built in (so a tool of the checkout, run from any directory, finds the checkout's
/// `.venv`: without it a selector run outside the checkout lost ARC to its fallback rule).
fn venv_homes(cwd: &Path) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = cwd.ancestors().map(Path::to_path_buf).collect();
    if let Some(workspace) = Path::new(env!("CARGO_MANIFEST_DIR")).parent()
        && !homes.iter().any(|h| h == workspace)
    {
        homes.push(workspace.to_path_buf());
    }
    homes
}

fn existing(p: &Path, searched: String) -> Result<PathBuf, RuntimeError> {
    if p.is_file() {
        Ok(p.to_path_buf())
    } else {
        Err(RuntimeError::LibraryNotFound { searched })
    }
}

fn find_in_venv(lib: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
        })
        .collect();
    dirs.sort();
    for d in dirs {
        let capi = d.join("site-packages/onnxruntime/capi");
        let Ok(entries) = std::fs::read_dir(&capi) else {
            continue;
        };
        let mut libs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libonnxruntime.so"))
            })
            .collect();
        libs.sort();
        if let Some(l) = libs.pop() {
            return Some(l);
        }
    }
    None
}

/// The process-wide runtime: ONNX Runtime allows one library and one environment per process.
struct Runtime {
    path: PathBuf,
    env: ort::environment::Environment,
}

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);

/// Loads ONNX Runtime (once per process) and returns its environment. Once a library is
/// loaded, later calls reuse it whatever `library` says; the path is returned for logs.
pub fn environment(
    library: Option<&Path>,
) -> Result<(ort::environment::Environment, PathBuf), RuntimeError> {
    let mut slot = RUNTIME.lock().map_err(|_| RuntimeError::Poisoned)?;
    if let Some(rt) = slot.as_ref() {
        return Ok((rt.env.clone(), rt.path.clone()));
    }
    let path = resolve_library(library)?;
    let load_err = |reason: String| RuntimeError::LibraryLoad {
        path: path.clone(),
        reason,
    };
    let env = ort::init_from(&path)
        .map_err(|e| load_err(e.to_string()))?
        .with_name("ccp")
        .build()
        .map_err(|e| load_err(e.to_string()))?;
    *slot = Some(Runtime {
        path: path.clone(),
        env: env.clone(),
    });
    Ok((env, path))
}

/// A session for the model in `bytes` with the suite's settings: one intra-op and one
/// inter-op thread (one small network per call; the caller owns any parallelism), every graph
/// optimization.
pub fn session(env: &ort::environment::Environment, bytes: &[u8]) -> Result<Session, ort::Error> {
    Session::builder(env)
        .and_then(|b| b.with_intra_threads(1).map_err(Into::into))
        .and_then(|b| b.with_inter_threads(1).map_err(Into::into))
        .and_then(|b| {
            b.with_optimization_level(GraphOptimizationLevel::All)
                .map_err(Into::into)
        })
        .and_then(|mut b| b.commit_from_memory(bytes))
}

/// Checks that `outlets` has a float tensor `name` of shape `[batch, len]` (batch 1 or
/// dynamic); otherwise the error `mismatch(what, expected, found)` builds.
pub fn check_outlet<E>(
    outlets: &[ort::value::Outlet],
    name: &str,
    len: usize,
    what: &'static str,
    mismatch: &impl Fn(&'static str, String, String) -> E,
) -> Result<(), E> {
    let expected = format!("{what} `{name}`: float [N or 1, {len}]");
    let Some(outlet) = outlets.iter().find(|o| o.name() == name) else {
        let found: Vec<&str> = outlets.iter().map(ort::value::Outlet::name).collect();
        return Err(mismatch(what, expected, format!("{what}s {found:?}")));
    };
    let ok = match outlet.dtype() {
        ValueType::Tensor { ty, shape, .. } => {
            *ty == TensorElementType::Float32
                && shape.len() == 2
                && (shape[0] == -1 || shape[0] == 1)
                && usize::try_from(shape[1]).is_ok_and(|d| d == len)
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(mismatch(what, expected, format!("{:?}", outlet.dtype())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_workspace_is_searched_after_the_current_directory() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let homes = venv_homes(Path::new("/"));
        assert_eq!(homes, [Path::new("/"), workspace]);
        // Inside the workspace its root is an ancestor already: searched once, in place.
        let inside = workspace.join("eval");
        let homes = venv_homes(&inside);
        assert_eq!(homes[0], inside);
        assert_eq!(homes.iter().filter(|h| *h == workspace).count(), 1);
        assert_eq!(homes.last().unwrap(), Path::new("/"));
    }
}
