//! ARC's trajectory store: every decision of the agent's `arc` flows, written to an `SQLite`
//! database that a learner process reads while the agent runs (`ccp-agent --arc-trajectories`;
//! the learner is `python -m ccp_suite.arc learn`, `docs/algorithms.md`).
//!
//! Why `SQLite` (in WAL mode): the store must survive a crash of either side (a transaction is
//! all or nothing, WAL keeps the file consistent), take one writer and concurrent readers in
//! other processes without blocking them (WAL readers see the last committed state while the
//! agent appends), need no server to run beside the agent on a test machine, and be readable
//! from Python's standard library. ARC used Redis; a server adds a process to keep alive and
//! loses data on a crash unless configured to persist.
//!
//! The report path never touches the database: [`TrajectoryStore::record`] puts the decision
//! on a bounded queue (dropping it, counted, when the writer is behind) and a writer thread
//! inserts batches in one transaction each.
//!
//! Table `decisions`: `id` (insertion order), `flow` (`<pid>-<sock id>-<seed>`), `step`,
//! `now_us`, `state` (little-endian `f32` x `history * 7`), `action` (applied, NULL when none),
//! `actor_action`, `model_version`, `throughput_mbps`, `rtt_ms`, `loss`, `interval_us`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ccp_algorithms::arc::{Decision, TrajectorySink};
use rusqlite::{Connection, params};

/// Decisions queued for the writer at most.
pub const QUEUE: usize = 65_536;

/// The schema (created if missing).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    flow TEXT NOT NULL,
    step INTEGER NOT NULL,
    now_us INTEGER NOT NULL,
    state BLOB NOT NULL,
    action REAL,
    actor_action REAL,
    model_version INTEGER NOT NULL,
    throughput_mbps REAL NOT NULL,
    rtt_ms REAL NOT NULL,
    loss REAL NOT NULL,
    interval_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_flow ON decisions (flow, step);";

/// The store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `SQLite` refused the file.
    #[error("ARC trajectory store {path}: {source}")]
    Sqlite {
        /// The database path.
        path: String,
        /// What `SQLite` said.
        source: rusqlite::Error,
    },
    /// The writer thread could not start.
    #[error("ARC trajectory store {path}: writer thread: {reason}")]
    Thread {
        /// The database path.
        path: String,
        /// What the system said.
        reason: String,
    },
}

/// The agent's side of the store: a queue and its writer thread.
#[derive(Debug)]
pub struct TrajectoryStore {
    tx: Mutex<Option<SyncSender<Decision>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    dropped: AtomicU64,
    written: Arc<AtomicU64>,
}

fn open(path: &Path) -> Result<Connection, StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.display().to_string(),
        source,
    };
    let c = Connection::open(path).map_err(err)?;
    c.busy_timeout(Duration::from_secs(5)).map_err(err)?;
    c.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    c.pragma_update(None, "synchronous", "NORMAL")
        .map_err(err)?;
    c.execute_batch(SCHEMA).map_err(err)?;
    Ok(c)
}

impl TrajectoryStore {
    /// Opens (creating) the database at `path` and starts the writer.
    pub fn open(path: &Path) -> Result<Arc<Self>, StoreError> {
        let conn = open(path)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let written = Arc::new(AtomicU64::new(0));
        let w = written.clone();
        let shown = path.display().to_string();
        let writer = std::thread::Builder::new()
            .name("arc-store".into())
            .spawn(move || write_loop(conn, &rx, &w, &shown))
            .map_err(|e| StoreError::Thread {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        Ok(Arc::new(Self {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            dropped: AtomicU64::new(0),
            written,
        }))
    }

    /// Decisions dropped because the writer was behind or gone.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Decisions committed so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Stops taking decisions and waits until the writer has committed what was queued (a
    /// process that ends after this loses none); later decisions are dropped and counted.
    pub fn close(&self) {
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(w) = writer
            && w.join().is_err()
        {
            tracing::error!("the ARC trajectory store's writer panicked");
        }
    }
}

impl TrajectorySink for TrajectoryStore {
    fn record(&self, d: &Decision) {
        let sent = match self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            Some(tx) => match tx.try_send(d.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !sent {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn write_loop(mut conn: Connection, rx: &Receiver<Decision>, written: &AtomicU64, path: &str) {
    let pid = std::process::id();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < 1024
            && let Ok(d) = rx.try_recv()
        {
            batch.push(d);
        }
        match insert(&mut conn, pid, &batch) {
            Ok(()) => {
                written.fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::error!(path, error = %e, n = batch.len(), "ARC decisions not stored");
            }
        }
    }
}

fn insert(conn: &mut Connection, pid: u32, batch: &[Decision]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO decisions (flow, step, now_us, state, action, actor_action, model_version,
             throughput_mbps, rtt_ms, loss, interval_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        for d in batch {
            let state: Vec<u8> = d.state.iter().flat_map(|v| v.to_le_bytes()).collect();
            let finite = |v: f32| v.is_finite().then_some(f64::from(v));
            st.execute(params![
                format!("{pid}-{}-{}", d.sock_id, d.flow_seed),
                i64::try_from(d.step).unwrap_or(i64::MAX),
                i64::try_from(d.now_us).unwrap_or(i64::MAX),
                state,
                finite(d.action),
                finite(d.actor_action),
                i64::try_from(d.model_version).unwrap_or(i64::MAX),
                d.interval.throughput_mbps,
                d.interval.rtt_ms,
                d.interval.loss,
                i64::try_from(d.interval.interval_us).unwrap_or(i64::MAX),
            ])?;
        }
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_algorithms::arc::Interval;

    #[test]
    fn decisions_reach_the_database_and_another_connection_reads_them() {
        let dir = std::env::temp_dir().join(format!("ccp-arc-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.sqlite");
        let _ = std::fs::remove_file(&path);
        let store = TrajectoryStore::open(&path).unwrap();
        for step in 0..100u64 {
            store.record(&Decision {
                sock_id: 4,
                flow_seed: 9,
                step,
                now_us: step * 50_000,
                state: vec![0.5; 70],
                action: if step == 0 { f32::NAN } else { 0.25 },
                actor_action: 0.2,
                model_version: 3,
                interval: Interval {
                    throughput_mbps: 8.0,
                    rtt_ms: 101.0,
                    ..Interval::default()
                },
            });
        }
        let reader = Connection::open(&path).unwrap();
        let mut n = 0;
        for _ in 0..500 {
            n = reader
                .query_row("SELECT COUNT(*) FROM decisions", [], |r| r.get::<_, i64>(0))
                .unwrap();
            if n == 100 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(n, 100);
        let (null_actions, blob): (i64, Vec<u8>) = reader
            .query_row(
                "SELECT (SELECT COUNT(*) FROM decisions WHERE action IS NULL), state FROM decisions WHERE step = 5",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(null_actions, 1);
        assert_eq!(blob.len(), 70 * 4);
        let mode: String = reader
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(store.dropped(), 0);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn close_returns_once_every_queued_decision_is_committed() {
        let dir = std::env::temp_dir().join(format!("ccp-arc-close-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.sqlite");
        let _ = std::fs::remove_file(&path);
        let store = TrajectoryStore::open(&path).unwrap();
        let d = Decision {
            sock_id: 1,
            flow_seed: 2,
            step: 0,
            now_us: 0,
            state: vec![0.0; 70],
            action: 0.1,
            actor_action: 0.1,
            model_version: 1,
            interval: Interval::default(),
        };
        for step in 0..5_000 {
            store.record(&Decision { step, ..d.clone() });
        }
        store.close();
        assert_eq!(store.written(), 5_000);
        store.record(&d);
        assert_eq!(store.dropped(), 1);
        store.close();
        let n: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM decisions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 5_000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_path_that_cannot_be_a_database_is_an_error() {
        let e = TrajectoryStore::open(Path::new("/proc/nope/x.sqlite")).unwrap_err();
        assert!(e.to_string().contains("/proc/nope/x.sqlite"), "{e}");
    }
}
