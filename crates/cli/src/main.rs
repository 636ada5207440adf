//! The `delayq` command: `serve` runs the server, the other subcommands talk to a server over
//! HTTP. Exit codes distinguish "not found" and conflicts from other errors (see `cli`).

mod cli;
mod client;
mod cmd;
mod duration;
mod settings;

use clap::Parser;

use crate::cli::{Cli, Command, DeadCommand};
use crate::client::{Failure, exit};

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(a) => cmd::serve::run(a).await,
        Command::Push(a) => cmd::push::run(a).await,
        Command::Get(a) => cmd::job::get(a).await,
        Command::List(a) => cmd::list::run(a).await,
        Command::Reschedule(a) => cmd::job::reschedule(a).await,
        Command::Delete(a) => cmd::job::delete(a).await,
        Command::Reserve(a) => cmd::reserve::reserve(a).await,
        Command::Ack(a) => cmd::lease::ack(a).await,
        Command::Nack(a) => cmd::lease::nack(a).await,
        Command::Touch(a) => cmd::lease::touch(a).await,
        Command::Release(a) => cmd::lease::release(a).await,
        Command::Bury(a) => cmd::lease::bury(a).await,
        Command::Stats(a) => cmd::stats::run(a).await,
        Command::Topics(a) => cmd::topics::list(a).await,
        Command::Dead(d) => match d.command {
            DeadCommand::List(a) => cmd::dead::list(a).await,
        },
        Command::Kick(a) => cmd::dead::kick(a).await,
        Command::Archive(a) => cmd::dead::archive(a).await,
        Command::Purge(a) => cmd::topics::purge(a).await,
        Command::Topic(a) => cmd::topic::run(a).await,
        Command::Schedule(a) => cmd::schedule::run(a).await,
        Command::Destination(a) => cmd::destination::run(a).await,
        Command::Pause(a) => cmd::pause::pause(a).await,
        Command::Resume(a) => cmd::pause::resume(a).await,
        Command::Bench(a) => cmd::bench::run(a).await,
        Command::Completions(a) => cmd::docs::completions(a),
        Command::Man(a) => cmd::docs::man(a),
    };
    if let Err(e) = result {
        let code = e
            .downcast_ref::<Failure>()
            .map(|f| f.code)
            .unwrap_or(exit::ERROR);
        eprintln!("delayq: {e:#}");
        std::process::exit(code);
    }
}
