//! Criterion benches of the hot paths (see benches/).
