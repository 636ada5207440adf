//! The arguments of the subcommands that describe the command line itself: `completions`
//! and `man`.

use std::path::PathBuf;

use clap::Args;

/// `delayq completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `delayq man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write delayq.1 and one page per subcommand (delayq-push.1 ...) into this directory,
    /// created when missing, instead of printing delayq.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
