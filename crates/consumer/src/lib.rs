//! consumer (in progress).
