//! The replay lab: see [`labs::lab::replay`].

fn main() -> std::process::ExitCode {
    labs::run_lab("replay", labs::lab::replay::run)
}
