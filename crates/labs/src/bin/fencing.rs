//! The fencing lab: see [`labs::lab::fencing`].

fn main() -> std::process::ExitCode {
    labs::run_lab("fencing", labs::lab::fencing::run)
}
