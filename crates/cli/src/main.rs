//! The `delayq` command: `serve` runs the server, the other subcommands talk to a server over
//! HTTP. Exit codes distinguish "not found" and conflicts from other errors (see `cli`).

mod args;
mod cli;
mod client;
mod cmd;
mod duration;
mod failure;
mod settings;
mod text;
mod tls;

use clap::Parser;

use crate::args::GlobalArgs;
use crate::cli::{Cli, Command, DeadCommand};
use crate::failure::{Failure, error_json, exit};

#[tokio::main]
async fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => usage_error(e),
    };
    let json = cli.global.json;
    let result = match misplaced_client_options(&cli.global, &cli.command) {
        Some(f) => Err(f.into()),
        None => run(cli.command).await,
    };
    if let Err(e) = result {
        let code = e
            .downcast_ref::<Failure>()
            .map(|f| f.code)
            .unwrap_or(exit::ERROR);
        // An empty message: the command has said all there is on standard output (a
        // reserve that got no job).
        if !e.to_string().is_empty() {
            if json {
                eprintln!("{}", error_json(&e));
            } else {
                eprintln!("delayq: {e:#}");
            }
        }
        std::process::exit(code);
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
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
        Command::Health(a) => cmd::health::run(a).await,
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
    }
}

/// A command line clap refused: its own message and exit 2, or with `--json` the error as
/// JSON on standard error (help and version print as usual).
fn usage_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let asked_json = std::env::args()
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    if !asked_json || matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit()
    }
    // clap's text up to the usage and tips that follow it, on one line.
    let rendered = e.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(str::trim)
        .collect();
    let message = message.join(" ");
    let message = message.trim_start_matches("error: ");
    eprintln!("{}", Failure::usage(message).to_json());
    std::process::exit(exit::USAGE)
}

/// The client options before a subcommand that does not talk to a server (clap puts the
/// global options on every subcommand): said, rather than ignored.
fn misplaced_client_options(global: &GlobalArgs, command: &Command) -> Option<Failure> {
    let given: Vec<&str> = [
        ("--server", global.server.is_some()),
        ("--token", global.token.is_some()),
        ("--ca-cert", global.ca_cert.is_some()),
        ("--json", global.json),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .map(|(flag, _)| flag)
    .collect();
    let (name, takes, what): (&str, &[&str], &str) = match command {
        // `serve --token` is its own (the tokens clients must send).
        Command::Serve(_) => (
            "serve",
            &["--token"],
            "it listens on --listen and logs JSON with --log-format json",
        ),
        Command::Bench(_) => (
            "bench",
            &["--json"],
            "it measures an engine directly (--engine), not a server",
        ),
        Command::Completions(_) => ("completions", &[], "it prints a shell script"),
        Command::Man(_) => ("man", &[], "it prints the manual page"),
        _ => return None,
    };
    let wrong: Vec<&str> = given.into_iter().filter(|f| !takes.contains(f)).collect();
    (!wrong.is_empty()).then(|| {
        Failure::usage(format!(
            "`delayq {name}` takes no {}: {what}; those options are for the subcommands that talk to a server",
            wrong.join(", ")
        ))
    })
}
