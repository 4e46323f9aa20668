//! Inference off the report path: one worker thread per [`ModelStore`] runs the actor for every
//! flow of it; a flow hands its state over and picks the answer up at a later report.
//!
//! A flow owns a [`Slot`]: at most one request of it is in flight (`busy`); the worker writes
//! the answer with a sequence number into one atomic word and clears `busy`. The report
//! handler only swaps flags, reads the word and pushes onto an unbounded channel: it never
//! waits for the worker, the model lock or the file system. Before each inference the worker
//! checks the model files for a new version, at most once per [`RELOAD_CHECK`] (wall clock: the
//! worker is infrastructure, not the algorithm's state machine).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::actor::ModelStore;

/// How often the worker looks at the model files.
pub const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// One flow's mailbox with the worker.
#[derive(Debug, Default)]
pub struct Slot {
    /// Sequence number (high 32 bits) and the action's `f32` bits (low 32 bits).
    answer: AtomicU64,
    /// The model version of the latest answer.
    version: AtomicU64,
    busy: AtomicBool,
    errors: AtomicU64,
}

impl Slot {
    /// The latest answer: (sequence number, action, model version); sequence 0: none yet.
    pub fn latest(&self) -> (u32, f32, u64) {
        let w = self.answer.load(Ordering::Acquire);
        (
            (w >> 32) as u32,
            f32::from_bits(w as u32),
            self.version.load(Ordering::Relaxed),
        )
    }

    /// Inferences that failed (the rate stayed).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    fn publish(&self, action: f32, version: u64) {
        self.version.store(version, Ordering::Relaxed);
        let seq = (self.answer.load(Ordering::Relaxed) >> 32).wrapping_add(1).max(1);
        self.answer.store(
            (seq << 32) | u64::from(action.to_bits()),
            Ordering::Release,
        );
    }
}

struct Job {
    state: Vec<f32>,
    slot: Arc<Slot>,
}

/// The worker of one store: the sending half of its queue.
#[derive(Debug)]
pub(super) struct Worker {
    tx: Mutex<Option<Sender<Job>>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("len", &self.state.len())
            .finish_non_exhaustive()
    }
}

/// Hands `state` to `store`'s worker (started on first use) unless `slot` has a request in
/// flight; returns whether it was queued. Never blocks on inference.
pub fn submit(store: &Arc<ModelStore>, slot: &Arc<Slot>, state: &[f32]) -> bool {
    if slot.busy.swap(true, Ordering::AcqRel) {
        return false;
    }
    let worker = store.worker.get_or_init(|| start(Arc::downgrade(store)));
    let job = Job {
        state: state.to_vec(),
        slot: slot.clone(),
    };
    let sent = worker
        .tx
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|tx| tx.send(job).is_ok());
    if !sent {
        slot.busy.store(false, Ordering::Release);
        slot.errors.fetch_add(1, Ordering::Relaxed);
    }
    sent
}

fn start(store: Weak<ModelStore>) -> Worker {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("arc-inference".into())
        .spawn(move || run(&store, &rx));
    match spawned {
        Ok(_) => Worker {
            tx: Mutex::new(Some(tx)),
        },
        Err(e) => {
            tracing::error!(error = %e, "ARC inference thread not started; rates stay as they are");
            Worker {
                tx: Mutex::new(None),
            }
        }
    }
}

fn run(store: &Weak<ModelStore>, rx: &Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        let Some(store) = store.upgrade() else {
            return;
        };
        store.refresh_every(RELOAD_CHECK);
        match store.current().map(|a| (a.act(&job.state), a.version())) {
            Some((Ok(a), version)) => job.slot.publish(a as f32, version),
            Some((Err(e), _)) => {
                if job.slot.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::error!(error = %e, "ARC inference failed; the rate stays");
                }
            }
            None => {
                job.slot.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        job.slot.busy.store(false, Ordering::Release);
    }
}
