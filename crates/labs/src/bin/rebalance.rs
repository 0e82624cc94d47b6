//! The rebalance lab: see [`labs::lab::rebalance`].

fn main() -> std::process::ExitCode {
    labs::run_lab("rebalance", labs::lab::rebalance::run)
}
