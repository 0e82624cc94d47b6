//! Stores of this process that were dropped while their writer still had work: the writer
//! finishes it on a blocking thread, then the lock is released. An opener of the same file
//! in this process waits for that instead of being refused as "in use".

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

/// Lock paths of stores still closing, with the signal their reaper gives when done.
static CLOSING: Mutex<Vec<(PathBuf, Arc<Done>)>> = Mutex::new(Vec::new());

/// Set once a closing store has let its file go.
#[derive(Debug, Default)]
struct Done {
    finished: Mutex<bool>,
    changed: Condvar,
}

fn closing() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Arc<Done>)>> {
    CLOSING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Blocks until no store of this process is still closing on `lock_path`. A path spelled
/// differently (relative vs absolute) is not matched: that opener is refused as "in use" and
/// may retry, as with any other owner.
pub(super) fn wait_for(lock_path: &Path) {
    let pending: Vec<Arc<Done>> = closing()
        .iter()
        .filter(|(p, _)| p == lock_path)
        .map(|(_, d)| Arc::clone(d))
        .collect();
    for done in pending {
        let mut finished = done.finished.lock().unwrap_or_else(PoisonError::into_inner);
        while !*finished {
            finished = done
                .changed
                .wait(finished)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What a dropped store leaves behind: its writer thread and its lock. Dropping the reaper
/// joins the writer (which finishes the queue), then releases the lock, then wakes openers
/// waiting in [`wait_for`].
pub(super) struct Reaper<L> {
    thread: Option<JoinHandle<()>>,
    lock: Option<L>,
    done: Arc<Done>,
}

impl<L> Reaper<L> {
    /// Registers the store on `lock_path` as closing.
    pub(super) fn new(thread: Option<JoinHandle<()>>, lock: Option<L>, lock_path: &Path) -> Self {
        let done = Arc::new(Done::default());
        closing().push((lock_path.to_path_buf(), Arc::clone(&done)));
        Reaper { thread, lock, done }
    }
}

impl<L> Drop for Reaper<L> {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            // Never on the writer thread itself (it holds no store), so this cannot deadlock;
            // a panic there has already been reported by the panic hook.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
        drop(self.lock.take());
        *self
            .done
            .finished
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.done.changed.notify_all();
        closing().retain(|(_, d)| !Arc::ptr_eq(d, &self.done));
    }
}
