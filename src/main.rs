//! The `binky` binary: parse the command line and call in.

use clap::Parser;

fn main() {
    // Before any thread starts: the variable is taken out of the environment, so nothing
    // this command starts inherits it.
    binky::failure::report::take_from_env();
    let cli = binky::cli::Cli::parse();
    // A command whose reader goes away (`binky events | head`) ends quietly, as other
    // command-line tools do; the daemon keeps Rust's default (ignore SIGPIPE: a client
    // hanging up must never kill it).
    if !matches!(
        cli.command,
        binky::cli::Command::Daemon {
            action: binky::cli::DaemonAction::Run
        }
    ) {
        // Before any thread is started.
        binky_platform::signal::default_sigpipe();
    }
    std::process::exit(binky::cli::run(cli));
}
