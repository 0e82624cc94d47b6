//! # The concurrency contract
//!
//! The core is **not** sans-IO in quinn-proto's sense, and does not pretend to be. Its shape
//! is openraft's: the kinds of group are synchronous state machines (`crate::group`: no
//! I/O, no awaits, no clock of their own), and the [`Coordinator`](crate::Coordinator) is an
//! async shell around them that awaits its ports (the offset store's writes) and parks
//! requests that Kafka answers later (a JoinGroup until its barrier completes, a follower's
//! SyncGroup until the leader's arrives) as `oneshot` receivers. It does no I/O of its own:
//! every await is on a port or on a lock, and time comes from the [`Clock`](crate::Clock).
//!
//! **Why this shape, and not effects.** The next kinds (Kafka's consumer protocol,
//! transactions) are request/response with no barrier; the group log will write a kind's
//! durable record before its answer goes out. Both fit a synchronous kind that returns its
//! answer plus what to persist, carried out by this shell under the gate below — which is
//! what `ClassicGroup` and `ChapterGroup` already are. Turning the shell itself into a
//! poll-based state machine would move the commit gate and the parked answers into every
//! caller (the broker, the labs, the driver) without making any kind simpler.
//!
//! ## Locks
//!
//! - **The group map** (`std::sync::RwLock`): held only to find, insert or remove a cell;
//!   never across an await, never while taking a group's lock.
//! - **A group's commit gate** (`tokio::sync::RwLock<()>`): guards ordering only.
//!   - A commit takes it *shared* before its checks and keeps it until its write is visible
//!     in the store: the store receives it as the commit's [`CommitFence`](crate::CommitFence)
//!     and drops it only when the write is done, even if the caller dropped the commit
//!     future meanwhile.
//!   - Whatever installs a generation (a chapter rebalance, a classic join barrier, a leave,
//!     an expiry), deletes offsets (retention, OffsetDelete, DeleteGroups) or removes the
//!     group takes it *exclusively*; a delete hands it to the store as an exclusive fence.
//!   - So no commit checked against generation G lands after G+1 is installed, no
//!     acknowledged commit is deleted by a delete that was checked before it, and commits of
//!     one group never wait for each other.
//! - **A group's state** (`std::sync::Mutex`): the kind's data. Never held across an await.
//!   Heartbeats, assignment reads and descriptions take only this lock, so they never wait
//!   for the store, however slow its disk.
//! - **The timer heap** (`std::sync::Mutex`): taken after a group's state lock, never before.
//!
//! Order: gate, then state, then heap. `unload_where` also takes the heap while holding the
//! map (to drop a moved group's heap entries while no cell of it can be created); nothing
//! takes the map while holding the heap. The gate is never awaited while the state lock is
//! held (a non-waiting `try_write` is allowed: `assignment` runs a due cooperative follow-up
//! that way).
//!
//! ## Timer runs
//!
//! Every deadline lives in one min-heap, armed lazily (a heartbeat touches no heap; an entry
//! that fires early finds nothing due and re-arms). `poll_timeout` says when the core next
//! needs attention; `handle_timeout` does what is due at the clock's time:
//!
//! - its first poll takes every due entry off the heap before it first waits, so a driver can
//!   poll it once and hand the rest to a task of its own, and a later call does not take the
//!   same work again;
//! - the due groups are worked on concurrently: one waiting for its gate (a slow commit)
//!   never delays another; each re-reads the clock once it has its gate;
//! - **cancel safety**: dropping the future loses nothing: every group whose work had not
//!   finished has its next deadline armed again (a guard does it on drop).
//!
//! ## Parked requests
//!
//! A caller that drops a waiting JoinGroup or SyncGroup (a client that disconnects) leaves
//! the group as Kafka does: the member stays until its session expires, it leaves, or a
//! rebalance or sync timeout removes it. A parked request whose answer can never come (its
//! member joined again, or the group moved on) is answered `REBALANCE_IN_PROGRESS`. A
//! group unloaded because another coordinator took it over (`unload_where`) answers every
//! parked request at once with a storage error of kind `NotCoordinator`.
