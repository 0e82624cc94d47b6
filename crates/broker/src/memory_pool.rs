//! The memory of the request frames being read, bounded as a whole
//! (`--queued-max-request-bytes`, Kafka's `queued.max.request.bytes`).
//!
//! Kafka's `SimpleMemoryPool` as its `SocketServer` builds it (non-strict): a frame's bytes
//! are taken from the pool once its length prefix is read, and the pool hands them out
//! whenever **any** memory is left, even less than the frame needs, so the amount available
//! may dip below zero (the most in use is the bound plus one frame). While nothing is left,
//! connections whose next frame has announced its length wait here and read nothing more;
//! no connection is closed for it. The bytes return when the request has been handled.
//!
//! Waiting holds no lock of the broker's: a connection waits on this pool alone, in the
//! order the frames announced themselves (one waiter at a time looks at the pool, through a
//! fair semaphore of one permit), and a frame announced when memory is left never waits.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tokio::sync::{Notify, Semaphore};

/// The shared budget of the frames being read.
pub(crate) struct MemoryPool {
    /// The bound, in bytes.
    capacity: i64,
    /// What is left; below zero after a frame larger than what was left (Kafka's
    /// non-strict pool).
    available: AtomicI64,
    /// One permit: the waiter holding it is the next to be served (a tokio semaphore is
    /// fair, so frames are served in the order they asked).
    queue: Semaphore,
    /// Woken whenever memory comes back.
    freed: Notify,
}

impl fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryPool")
            .field("capacity", &self.capacity)
            .field("available", &self.available())
            .finish()
    }
}

impl MemoryPool {
    /// A pool of `capacity` bytes (at least 1: the configuration refuses less).
    pub(crate) fn new(capacity: u64) -> Arc<MemoryPool> {
        let capacity = i64::try_from(capacity).unwrap_or(i64::MAX).max(1);
        Arc::new(MemoryPool {
            capacity,
            available: AtomicI64::new(capacity),
            queue: Semaphore::new(1),
            freed: Notify::new(),
        })
    }

    /// What is left, in bytes (negative while a frame larger than what was left is held).
    pub(crate) fn available(&self) -> i64 {
        self.available.load(Ordering::Acquire)
    }

    /// `size` bytes for one frame at once, if memory is left and no frame waits before it
    /// (the common case: no allocation for a wait).
    pub(crate) fn try_reserve(self: &Arc<Self>, size: usize) -> Option<Reservation> {
        let bytes = i64::try_from(size).unwrap_or(i64::MAX);
        let turn = self.queue.try_acquire().ok()?;
        if bytes > 0 && self.available.load(Ordering::Acquire) <= 0 {
            return None;
        }
        self.available.fetch_sub(bytes, Ordering::AcqRel);
        drop(turn);
        Some(Reservation {
            pool: self.clone(),
            bytes,
        })
    }

    /// `size` bytes for one frame, once any memory is left; they return to the pool when
    /// the [`Reservation`] is dropped. Cancel-safe (dropping the future gives up its place
    /// and takes nothing); owns the pool, so it can be kept across a `select!`.
    pub(crate) async fn reserve(self: Arc<Self>, size: usize) -> Reservation {
        let bytes = i64::try_from(size).unwrap_or(i64::MAX);
        if bytes == 0 {
            // Kafka allocates nothing for an empty frame.
            return Reservation { pool: self, bytes };
        }
        // The semaphore is never closed; were it, waiters would still be served, unordered.
        let turn = self.queue.acquire().await.ok();
        loop {
            // Registered before looking, so a release between the look and the wait wakes it.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            // Only the holder of the turn takes memory, releases only give it back: what it
            // sees above zero stays above zero until it takes.
            if self.available.load(Ordering::Acquire) > 0 {
                self.available.fetch_sub(bytes, Ordering::AcqRel);
                break;
            }
            freed.await;
        }
        drop(turn);
        Reservation { pool: self, bytes }
    }
}

/// One frame's share of the pool, returned when dropped.
pub(crate) struct Reservation {
    pool: Arc<MemoryPool>,
    bytes: i64,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.pool.available.fetch_add(self.bytes, Ordering::AcqRel);
            self.pool.freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const WAIT: Duration = Duration::from_millis(100);

    /// Kafka's non-strict pool: a frame larger than what is left is served while anything is
    /// left (the pool goes below zero), the next one waits until memory comes back.
    #[tokio::test]
    async fn a_frame_is_served_while_any_memory_is_left() {
        let pool = MemoryPool::new(1000);
        let a = pool.clone().reserve(600).await;
        assert_eq!(pool.available(), 400);
        let b = pool.try_reserve(600).expect("400 bytes are left");
        assert_eq!(pool.available(), -200);
        assert!(pool.try_reserve(1).is_none(), "nothing is left");
        let c = pool.clone().reserve(1);
        tokio::pin!(c);
        assert!(tokio::time::timeout(WAIT, c.as_mut()).await.is_err());
        drop(a);
        assert_eq!(pool.available(), 400);
        let c = tokio::time::timeout(WAIT, c)
            .await
            .expect("served once freed");
        assert_eq!(pool.available(), 399);
        drop((b, c));
        assert_eq!(pool.available(), 1000);
    }

    /// A frame larger than the whole pool is served once anything is left (never a
    /// deadlock), and empty frames take nothing.
    #[tokio::test]
    async fn a_frame_larger_than_the_pool_is_served_and_returned() {
        let pool = MemoryPool::new(10);
        let big = pool.clone().reserve(25).await;
        assert_eq!(pool.available(), -15);
        let empty = pool.clone().reserve(0).await;
        assert_eq!(pool.available(), -15);
        drop((big, empty));
        assert_eq!(pool.available(), 10);
    }

    /// Waiters are served in the order they asked, and one given up takes nothing.
    #[tokio::test]
    async fn waiters_are_served_in_order_and_cancelled_ones_take_nothing() {
        let pool = MemoryPool::new(10);
        let first = pool.clone().reserve(10).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (pool, tx) = (pool.clone(), tx.clone());
            tasks.push(tokio::spawn(async move {
                let r = pool.reserve(10).await;
                tx.send(i).expect("the test listens");
                // Hold it a moment: the next waits for it.
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(r);
            }));
            // Let each one queue before the next.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            pool.try_reserve(0).is_none(),
            "a frame does not pass the ones waiting"
        );
        let cancelled = pool.clone().reserve(5);
        assert!(tokio::time::timeout(WAIT, cancelled).await.is_err());
        drop(first);
        for want in 0..3 {
            assert_eq!(rx.recv().await, Some(want));
        }
        for t in tasks {
            t.await.expect("no panic");
        }
        assert_eq!(pool.available(), 10, "everything returned, nothing taken");
    }
}
