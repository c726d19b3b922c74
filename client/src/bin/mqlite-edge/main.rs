//! `mqlite-edge`: mqlite's client-mode command line (mqlite-clients.md §2) for
//! mqlite-edge, on the `mqlite-edge-client` crate. Named apart from mqlite's own `mqlite`
//! so both can be installed side by side. docs/clients.md lists the commands.

mod args;
mod commands;
mod output;
mod receive;
mod text;

use std::process::ExitCode;

use args::{parse, value, Flag, ParseError, Parsed};
use mqlite_edge_client::{Client, Endpoint};
use output::Format;

/// Why a command failed, and how it exits.
pub enum Failure {
    /// Exit 1: `error: <message>` on stderr.
    Error(String),
    /// Exit 2: a flag error, with the command's flags on stderr.
    Flags(String),
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure::Error(e.to_string())
    }
}

/// Global flags, after the command name.
const GLOBAL: [Flag; 3] = [
    value(
        "endpoint",
        "broker URL or mqlite:// DSN (default $MQLITE_ENDPOINT)",
    ),
    value(
        "token",
        "Bearer token (default $MQLITE_TOKEN for $MQLITE_ENDPOINT)",
    ),
    value("output", "text or json"),
];

/// What a command runs with.
pub struct Context {
    pub client: Client,
    pub format: Format,
    pub args: Parsed,
}

impl Context {
    /// Exactly `n` positionals, else a usage error naming `usage`.
    pub fn positionals(&self, n: usize, usage: &str) -> Result<&[String], Failure> {
        if self.args.positionals.len() != n {
            return Err(Failure::Error(format!("usage: mqlite-edge {usage}")));
        }
        Ok(&self.args.positionals)
    }
}

type Run = fn(&Context) -> Result<(), Failure>;

/// A command: its names, usage, own flags and what it runs.
pub struct Command {
    pub names: &'static [&'static str],
    pub usage: &'static str,
    pub flags: &'static [Flag],
    pub run: Run,
}

const USAGE: &str = "usage: mqlite-edge <command> [arguments] [flags]

Talks to an mqlite-edge (or mqlite) broker named by MQLITE_ENDPOINT or --endpoint,
with the token MQLITE_TOKEN or --token. Every command takes --endpoint, --token and
--output text|json after its name.

commands:";

fn usage() -> String {
    let lines: String = commands::ALL
        .iter()
        .map(|c| format!("  {}\n", c.usage))
        .collect();
    format!("{USAGE}\n{lines}  version\n  help\n")
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = argv.first() else {
        print!("{}", usage());
        return ExitCode::from(2);
    };
    let rest = &argv[1..];
    match name.as_str() {
        "version" | "-v" | "--version" => {
            if !rest.is_empty() {
                eprintln!("error: usage: mqlite-edge version");
                return ExitCode::from(1);
            }
            println!("mqlite-edge {}", mqlite_edge_client::VERSION);
            return ExitCode::SUCCESS;
        }
        "help" | "-h" | "--help" => {
            if !rest.is_empty() {
                eprintln!("error: usage: mqlite-edge help");
                return ExitCode::from(1);
            }
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let Some(command) = commands::ALL
        .iter()
        .find(|c| c.names.contains(&name.as_str()))
    else {
        eprintln!("unknown command: {name}");
        print!("{}", usage());
        return ExitCode::from(2);
    };
    let flags: Vec<Flag> = command.flags.iter().chain(GLOBAL.iter()).copied().collect();
    let parsed = match parse(rest, &flags) {
        Ok(p) => p,
        Err(ParseError::Help) => {
            eprint!(
                "usage: mqlite-edge {}\n{}",
                command.usage,
                args::describe(&flags)
            );
            return ExitCode::SUCCESS;
        }
        Err(ParseError::Flag(e)) => {
            eprint!(
                "{e}\nusage: mqlite-edge {}\n{}",
                command.usage,
                args::describe(&flags)
            );
            return ExitCode::from(2);
        }
    };
    match context(parsed).and_then(|c| (command.run)(&c)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(Failure::Flags(e)) => {
            eprint!(
                "{e}\nusage: mqlite-edge {}\n{}",
                command.usage,
                args::describe(&flags)
            );
            ExitCode::from(2)
        }
    }
}

/// The output format, the broker and the token (mqlite-clients.md §2.2, §2.3).
fn context(args: Parsed) -> Result<Context, Failure> {
    let format = match args.get("output").unwrap_or("text") {
        "text" => Format::Text,
        "json" => Format::Json,
        other => {
            return Err(Failure::Error(format!(
                "invalid --output {other:?}: want text or json"
            )))
        }
    };
    let ambient = std::env::var("MQLITE_ENDPOINT").unwrap_or_default();
    let ambient_token = std::env::var("MQLITE_TOKEN").unwrap_or_default();
    let endpoint = match args.get("endpoint") {
        Some(e) => e.to_owned(),
        None => ambient.clone(),
    };
    if endpoint.is_empty() {
        return Err(Failure::Error(
            "no broker: set MQLITE_ENDPOINT or pass --endpoint (this build has no embedded mode)"
                .into(),
        ));
    }
    let parsed = Endpoint::parse(&endpoint)?;
    let token = match args.get("token") {
        // Given, even empty: verbatim; empty also drops a DSN's credential.
        Some(token) => token.to_owned(),
        None if !args.given("endpoint") || Endpoint::same_broker(&endpoint, &ambient) => {
            if ambient_token.is_empty() {
                parsed.token
            } else {
                ambient_token
            }
        }
        None => {
            if !ambient_token.is_empty() {
                eprintln!(
                    "warning: MQLITE_TOKEN was not forwarded to the changed target {}; \
                     use --token to authenticate there",
                    parsed.base
                );
            }
            parsed.token
        }
    };
    Ok(Context {
        client: Client::new(&parsed.base, &token),
        format,
        args,
    })
}
