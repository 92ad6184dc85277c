//! Command-line flags, parsed by hand from `std::env::args` (no extra deps).

use std::fmt;

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the demo with these options.
    Run(Options),
    /// Print the usage text and exit 0.
    Help,
}

/// The demo's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Calls the client sends to the gateway (the rejected call is extra).
    pub requests: usize,
    /// Backend calls the gateway fans out per request.
    pub fan_out: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            requests: 20,
            fan_out: 4,
        }
    }
}

/// Most requests / fan-out accepted: keeps the run to a few seconds.
pub const MAX_REQUESTS: usize = 10_000;
/// Most backend calls per request.
pub const MAX_FAN_OUT: usize = 64;

/// The usage text for `--help`.
pub const USAGE: &str = "\
tonic-hotpath quickstart: a client, a gateway and a backend on 127.0.0.1,
using metadata, tenant, stats and arena together.

USAGE:
    cargo run --release --example quickstart -- [OPTIONS]

OPTIONS:
    --requests N    calls from the client to the gateway (default 20, 1..=10000)
    --fan-out K     backend calls per gateway request (default 4, 1..=64)
    -h, --help      print this help
";

/// A flag the demo cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// An argument that is not a known flag.
    UnknownFlag(String),
    /// A flag given without its value.
    MissingValue(&'static str),
    /// A value that is not an integer in the flag's range.
    BadValue {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: String,
        /// Largest allowed value (smallest is 1).
        max: usize,
    },
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::UnknownFlag(flag) => write!(f, "unknown argument '{flag}'"),
            CliError::MissingValue(flag) => write!(f, "{flag} needs a value"),
            CliError::BadValue { flag, value, max } => {
                write!(
                    f,
                    "{flag} must be an integer from 1 to {max}, got '{value}'"
                )
            }
        }
    }
}

impl std::error::Error for CliError {}

/// Parses the arguments after the program name.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Command, CliError> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let (name, max, slot) = match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--requests" => ("--requests", MAX_REQUESTS, &mut options.requests),
            "--fan-out" => ("--fan-out", MAX_FAN_OUT, &mut options.fan_out),
            _ => return Err(CliError::UnknownFlag(arg)),
        };
        let value = inline
            .or_else(|| args.next())
            .ok_or(CliError::MissingValue(name))?;
        *slot = match value.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                return Err(CliError::BadValue {
                    flag: name,
                    value,
                    max,
                });
            }
        };
    }
    Ok(Command::Run(options))
}
