//! The writer thread of a [`JsonFileStore`](super::JsonFileStore): it takes every write
//! queued since its last file write, applies them all to one new version of the file, makes
//! that durable with one write, fsync, rename and directory fsync, publishes it to readers,
//! and only then releases the writes' fences and answers their callers.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use coordinator_core::{CommitFence, OffsetMap, TopicPartition};

use super::decode::Groups;
use super::encode::{encode_file, encode_group, merge_newer};
use super::files::Files;
use crate::fs::Fs;
use crate::group_commit::{answer, AbandonOnExit, Ack, Queue, Taken};

/// One write to one group.
pub(super) enum Change {
    /// Merge these offsets.
    Commit(OffsetMap),
    /// Remove these partitions, or all of them.
    Delete(Option<Vec<TopicPartition>>),
}

/// A write waiting for the writer: what to change, the fence to keep until it is visible, and
/// where to send the outcome.
pub(super) struct Request {
    pub(super) group: String,
    pub(super) change: Change,
    pub(super) fence: CommitFence,
    pub(super) ack: Ack,
}

/// What the callers and the writer share.
pub(super) struct Shared {
    pub(super) files: Files,
    /// What reads return: exactly the durable content of the file. Only the writer changes
    /// it, once per batch, after the batch is durable.
    view: RwLock<Groups>,
    pub(super) queue: Queue<Request>,
    /// At most this many writes go into one file write.
    pub(super) max_batch: usize,
}

impl Shared {
    pub(super) fn new(files: Files, groups: Groups, max_batch: usize) -> Shared {
        Shared {
            files,
            view: RwLock::new(groups),
            queue: Queue::default(),
            max_batch: max_batch.max(1),
        }
    }

    pub(super) fn read_view(&self) -> RwLockReadGuard<'_, Groups> {
        // Nothing panics while the lock is held, so a poisoned lock still guards a whole map.
        self.view.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the writer thread owns: the file system and the encoded file.
pub(super) struct Writer<F> {
    fs: F,
    /// Each group's `"<group>":[…]` bytes as in the file, sorted by group id.
    encoded: BTreeMap<String, Vec<u8>>,
    /// The file buffer, kept between writes so its allocation is reused.
    buf: Vec<u8>,
}

impl<F: Fs> Writer<F> {
    /// The writer of a file holding `groups`.
    pub(super) fn new(fs: F, groups: &Groups) -> Self {
        let encoded = groups
            .iter()
            .map(|(group, offsets)| {
                let mut bytes = Vec::new();
                encode_group(&mut bytes, group, offsets.iter().map(|(tp, &o)| (tp, o)));
                (group.clone(), bytes)
            })
            .collect();
        Writer {
            fs,
            encoded,
            buf: Vec::new(),
        }
    }

    /// The writer thread's loop: one batch after another until the queue closes.
    pub(super) fn run(mut self, shared: &Shared) {
        // If this thread ever stops early, callers must not wait for it for ever.
        let _abandon = AbandonOnExit(&shared.queue);
        let mut batch = Vec::new();
        while shared.queue.take(shared.max_batch, &mut batch, None) == Taken::Batch {
            self.write_batch(shared, &mut batch);
        }
    }

    /// Applies every request of `batch` (in order) in one durable file write, publishes the
    /// result, then releases the fences and answers the callers. A failed write changes
    /// nothing and fails every request of the batch.
    fn write_batch(&mut self, shared: &Shared, batch: &mut Vec<Request>) {
        let mut waiting = Vec::with_capacity(batch.len());
        let mut deltas: BTreeMap<String, Delta> = BTreeMap::new();
        for Request {
            group,
            change,
            fence,
            ack,
        } in batch.drain(..)
        {
            waiting.push((fence, ack));
            deltas.entry(group).or_default().apply(change);
        }

        // Each touched group's new bytes; `None`: the group has no offsets left. Only this
        // thread changes the view, so what it reads here is what the file holds.
        let fresh: Vec<Option<Vec<u8>>> = {
            let view = shared.read_view();
            deltas
                .iter()
                .map(|(group, delta)| {
                    let old_len = self.encoded.get(group).map_or(0, Vec::len);
                    let mut bytes = Vec::with_capacity(old_len + 64 * delta.set.len());
                    let entries = delta.merged(view.get(group));
                    let mut any = false;
                    encode_group(&mut bytes, group, entries.inspect(|_| any = true));
                    any.then_some(bytes)
                })
                .collect()
        };
        self.buf.clear();
        {
            let stored = self.encoded.iter().map(|(g, b)| (g, Some(b.as_slice())));
            let touched = deltas.keys().zip(fresh.iter().map(Option::as_deref));
            let groups = merge_newer(stored, touched).filter_map(|(_, bytes)| bytes);
            encode_file(&mut self.buf, groups);
        }

        let outcome = match self.persist(&shared.files, &self.buf) {
            Ok(()) => {
                let mut view = shared.view.write().unwrap_or_else(PoisonError::into_inner);
                for ((group, delta), bytes) in deltas.into_iter().zip(fresh) {
                    match bytes {
                        None => {
                            view.remove(&group);
                            self.encoded.remove(&group);
                        }
                        Some(bytes) => {
                            match view.get_mut(&group) {
                                Some(stored) => delta.apply_to(stored),
                                None => {
                                    let mut offsets = OffsetMap::new();
                                    delta.apply_to(&mut offsets);
                                    view.insert(group.clone(), offsets);
                                }
                            }
                            self.encoded.insert(group, bytes);
                        }
                    }
                }
                Ok(())
            }
            Err(failure) => Err(self.recover(&shared.files, failure, waiting.len())),
        };

        // The batch is durable and visible (or failed and changed nothing): only now may the
        // fences go, and every fence goes before any caller hears back.
        answer(&shared.queue, waiting, &outcome);
    }

    /// The persist protocol: temp file, write, fsync, rename over the target, fsync the
    /// directory.
    fn persist(&self, files: &Files, bytes: &[u8]) -> Result<(), PersistFailure> {
        let fs = &self.fs;
        let temp = files.temp.as_path();
        let before_rename = |step: &str, e: io::Error| {
            // Best effort: a leftover temp file is harmless (the next write truncates it, the
            // next open removes it), but it holds disk space, which matters most after ENOSPC.
            let _ = fs.remove_file(temp);
            PersistFailure {
                renamed: false,
                step: format!("{step} `{}`", temp.display()),
                error: e,
            }
        };
        let file = fs
            .create_temp(temp)
            .map_err(|e| before_rename("creating", e))?;
        fs.write_all(&file, bytes)
            .map_err(|e| before_rename("writing", e))?;
        fs.fsync(&file).map_err(|e| before_rename("fsync of", e))?;
        drop(file);
        fs.rename(temp, &files.path)
            .map_err(|e| before_rename("renaming", e))?;
        fs.fsync_dir(&files.dir).map_err(|e| PersistFailure {
            renamed: true,
            step: format!("fsync of directory `{}`", files.dir.display()),
            error: e,
        })
    }

    /// Turns a failed persist into the batch's error message, first putting the previous
    /// content back if the new file had already replaced it.
    fn recover(
        &mut self,
        files: &Files,
        failure: PersistFailure,
        writes: usize,
    ) -> (String, io::Error) {
        let PersistFailure {
            renamed,
            step,
            error,
        } = failure;
        let mut message = format!(
            "cannot persist offsets to `{}`: {step} failed: {error}",
            files.path.display()
        );
        if renamed {
            self.buf.clear();
            encode_file(&mut self.buf, self.encoded.values().map(Vec::as_slice));
            match self.persist(files, &self.buf) {
                Ok(()) => message.push_str("; the previous content was restored"),
                Err(restore) => {
                    message.push_str(&format!(
                        "; restoring the previous content also failed ({} failed: {}), so \
                         the file may hold this write's offsets until the next successful \
                         write rewrites it",
                        restore.step, restore.error
                    ));
                }
            }
        }
        tracing::warn!(
            path = %files.path.display(), writes, error = %message,
            "offset write failed"
        );
        (message, error)
    }
}

/// What a batch does to one group: the requests' changes folded in order.
#[derive(Default)]
struct Delta {
    /// Every stored offset goes first (a delete of the whole group).
    clear: bool,
    /// Stored partitions removed (unless `set` gives them a new offset).
    removed: BTreeSet<TopicPartition>,
    /// Offsets written over whatever is stored.
    set: OffsetMap,
}

impl Delta {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Commit(offsets) => {
                for tp in offsets.keys() {
                    self.removed.remove(tp);
                }
                if self.set.is_empty() {
                    self.set = offsets;
                } else {
                    self.set.extend(offsets);
                }
            }
            Change::Delete(None) => {
                *self = Delta {
                    clear: true,
                    ..Delta::default()
                }
            }
            Change::Delete(Some(partitions)) => {
                for tp in partitions {
                    self.set.remove(&tp);
                    if !self.clear {
                        self.removed.insert(tp);
                    }
                }
            }
        }
    }

    /// The group's entries after this delta, sorted, given its stored offsets.
    fn merged<'a>(
        &'a self,
        stored: Option<&'a OffsetMap>,
    ) -> impl Iterator<Item = (&'a TopicPartition, i64)> + 'a {
        let stored = if self.clear { None } else { stored };
        let kept = stored
            .into_iter()
            .flatten()
            .filter(|(tp, _)| self.removed.is_empty() || !self.removed.contains(*tp))
            .map(|(tp, &o)| (tp, o));
        merge_newer(kept, self.set.iter().map(|(tp, &o)| (tp, o)))
    }

    /// Applies this delta to the group's stored offsets.
    fn apply_to(self, stored: &mut OffsetMap) {
        if self.clear {
            stored.clear();
        }
        for tp in &self.removed {
            stored.remove(tp);
        }
        if stored.is_empty() {
            *stored = self.set;
        } else {
            stored.extend(self.set);
        }
    }
}

/// Where the persist protocol stopped.
struct PersistFailure {
    /// The new file had already replaced the old one.
    renamed: bool,
    step: String,
    error: io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: u32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn map(entries: &[(u32, i64)]) -> OffsetMap {
        entries.iter().map(|&(p, o)| (tp(p), o)).collect()
    }

    /// Folds `changes` into a delta and applies it to `stored` both ways: as the encoder sees
    /// it and as memory does. The two must agree.
    fn fold(stored: &OffsetMap, changes: Vec<Change>) -> OffsetMap {
        let mut delta = Delta::default();
        for change in changes {
            delta.apply(change);
        }
        let encoded: OffsetMap = delta
            .merged(Some(stored))
            .map(|(tp, o)| (tp.clone(), o))
            .collect();
        let mut in_memory = stored.clone();
        delta.apply_to(&mut in_memory);
        assert_eq!(encoded, in_memory, "the file and memory disagree");
        in_memory
    }

    #[test]
    fn a_batch_applies_its_changes_in_order() {
        let stored = map(&[(0, 1), (1, 1), (2, 1)]);
        let commit = |e: &[(u32, i64)]| Change::Commit(map(e));
        let delete = |p: &[u32]| Change::Delete(Some(p.iter().map(|&p| tp(p)).collect()));
        assert_eq!(
            fold(&stored, vec![commit(&[(0, 5)]), commit(&[(0, 6), (3, 6)])]),
            map(&[(0, 6), (1, 1), (2, 1), (3, 6)])
        );
        assert_eq!(
            fold(&stored, vec![delete(&[1]), commit(&[(1, 7)]), delete(&[2])]),
            map(&[(0, 1), (1, 7)]),
            "a commit after a delete brings the partition back"
        );
        assert_eq!(
            fold(&stored, vec![commit(&[(5, 5)]), delete(&[5, 0])]),
            map(&[(1, 1), (2, 1)]),
            "a delete after a commit removes it again"
        );
        assert_eq!(
            fold(&stored, vec![commit(&[(5, 5)]), Change::Delete(None)]),
            OffsetMap::new()
        );
        assert_eq!(
            fold(
                &stored,
                vec![Change::Delete(None), commit(&[(9, 9)]), delete(&[0])]
            ),
            map(&[(9, 9)]),
            "nothing stored survives a whole-group delete"
        );
    }
}
