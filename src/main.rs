//! The `binky` binary: parse the command line and call in.

use clap::Parser;

fn main() {
    let cli = binky::cli::Cli::parse();
    std::process::exit(binky::cli::run(cli));
}
