//! labs (in progress).
