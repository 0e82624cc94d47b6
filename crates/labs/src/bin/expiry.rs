//! The expiry lab: see [`labs::lab::expiry`].

fn main() -> std::process::ExitCode {
    labs::run_lab("expiry", labs::lab::expiry::run)
}
