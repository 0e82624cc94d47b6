//! The shutdown signal every connection handler listens to (mini-redis's `Shutdown`).

use tokio::sync::broadcast;

/// Listens for the broker's shutdown. `recv` resolves once the signal was sent (or its
/// sender dropped), and at once on every later call.
#[derive(Debug)]
pub(crate) struct Shutdown {
    is_shutdown: bool,
    notify: broadcast::Receiver<()>,
}

impl Shutdown {
    pub(crate) fn new(notify: broadcast::Receiver<()>) -> Shutdown {
        Shutdown {
            is_shutdown: false,
            notify,
        }
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.is_shutdown
    }

    /// Waits for the signal. Cancel-safe.
    pub(crate) async fn recv(&mut self) {
        if self.is_shutdown {
            return;
        }
        // Lagged cannot happen (one message is ever sent); any outcome means "stop".
        let _ = self.notify.recv().await;
        self.is_shutdown = true;
    }
}
