//! `delayq completions` and `delayq man`: shell completion scripts and roff manual pages,
//! both generated from the clap definitions in `cli.rs`, so they never drift from `--help`.

use std::io::Write;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};

pub fn completions(a: CompletionsArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "delayq", &mut out);
    std::io::stdout()
        .write_all(&out)
        .context("cannot write the completion script to standard output")
}

pub fn man(a: ManArgs) -> anyhow::Result<()> {
    match a.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(Cli::command(), &dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .context("cannot render the manual page")?;
            std::io::stdout()
                .write_all(&out)
                .context("cannot write the manual page to standard output")
        }
    }
}
