//! Exit codes, and the usage error that checks after clap's raise.
//!
//! Usage errors have a code of their own (64, `EX_USAGE` of sysexits.h)
//! so that a script branching on "denied" (2) never takes a typo for a
//! sold-out item. Clap's own usage errors (unknown option, missing
//! argument, a value its parser refuses) are mapped to it in `main`, and so
//! is [`Usage`], for what can only be checked once the arguments are
//! parsed (an odd number of hash fields, two options that need each other).

use std::process::ExitCode;

/// Done (also a repeated grab, a replayed order).
pub const OK: u8 = 0;
/// An error: the node refused the request, or could not be reached.
pub const ERROR: u8 = 1;
/// Denied: a purchase limit, or an envelope empty, expired or busy.
pub const DENIED: u8 = 2;
/// `envelope audit` found books that are off.
pub const BOOKS_OFF: u8 = 3;
/// A bad command line.
pub const USAGE: u8 = 64;

/// What `rush --help` says about exit codes (README.md says the same).
pub const HELP: &str = "\
Exit codes:
  0   done (also a repeated grab or a replayed order)
  1   error: the node refused the request or could not be reached (why is on stderr)
  2   denied: limit acquire limited; envelope grab empty, expired or busy
  3   envelope audit found books that are off
  64  usage: a bad command line (unknown command or option, missing or malformed value)";

pub fn code(c: u8) -> ExitCode {
    ExitCode::from(c)
}

/// A command line that parsed but makes no sense: exit [`USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);
