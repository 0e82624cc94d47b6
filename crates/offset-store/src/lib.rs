//! offset-store (in progress).
