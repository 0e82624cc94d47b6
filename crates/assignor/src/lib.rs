//! assignor (in progress).
