//! `rush`: the command-line client. Exit codes are in `exit` (and in
//! `rush --help`): 0 done, 1 error, 2 denied, 3 books off, 64 usage.

mod args;
mod catalog;
mod cluster;
mod envelope;
mod exit;
mod limits;
mod links;
mod out;

use bytes::Bytes;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use out::{show, Out};
use rush_client::protocol::cmd::{ReplPromote, ReplStatus, SetCond, TtlReply};
use rush_client::{format_remaining, Client, ClientOptions, RetryHook, RetryNotice};
use serde_json::json;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "rush",
    version,
    about = "Command-line client for rushd",
    after_help = exit::HELP
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Cmd,
}

/// Options every command takes, listed under their own heading.
#[derive(Args, Debug)]
#[command(next_help_heading = "Global options")]
struct Global {
    /// Any node's address, HOST:PORT (HOST alone: port 7379). Requests are
    /// routed to the node serving their slot (the map is loaded from this
    /// node).
    #[arg(
        long,
        env = "RUSH_ADDR",
        default_value = "127.0.0.1:7379",
        value_parser = args::addr,
        global = true
    )]
    addr: String,
    /// Token for HELLO, when the node requires one.
    #[arg(long, env = "RUSH_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// Connect over TLS, trusting the CA certificates in this PEM file.
    #[arg(long, env = "RUSH_TLS_CA", global = true)]
    tls_ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (default: the host of --addr).
    #[arg(long, global = true)]
    tls_name: Option<String>,
    /// Seconds to wait for an answer, retries included (a node restarting,
    /// a slot changing hands); waits are announced on stderr. Default 30,
    /// but the node --addr names gets 5 s to be reached unless --timeout is
    /// given, so a mistyped address fails fast.
    #[arg(
        long,
        value_name = "SECONDS",
        value_parser = args::seconds,
        global = true
    )]
    timeout: Option<u64>,
    /// Print the answer as one JSON document.
    #[arg(long, global = true)]
    json: bool,
}

/// How long a command waits for answers, retries included, when
/// `--timeout` is not given.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the node `--addr` names is given to be reached when `--timeout`
/// is not given: as long as one connection attempt may take (the client's
/// connect timeout), whether the node is silent or refuses. Long enough for
/// a node restarting on this machine; short enough that a mistyped port is
/// an error within seconds, not half a minute.
const DEFAULT_SEED_WAIT: Duration = Duration::from_secs(5);

/// The global options that mean nothing to commands that need no node.
const NODE_OPTIONS: [&str; 5] = ["addr", "token", "tls_ca", "tls_name", "timeout"];

#[derive(Subcommand, Debug)]
enum ReplicationCmd {
    /// Role, primary, replication state, positions and lag.
    Status,
    /// Make this replica (--addr) a primary that takes writes. It stops
    /// following and restarts its serving in place, on the same addresses;
    /// its old primary must not take writes any more (fence it first).
    Promote,
}

/// INFO-style rows: "name: value" lines, or one JSON object.
fn print_rows(out: &Out, rows: &[(String, String)]) -> anyhow::Result<()> {
    out.print(
        || {
            rows.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n")
        },
        || {
            json!(rows
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect::<serde_json::Map<_, _>>())
        },
    )
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Check the node answers.
    Ping,
    /// Node facts.
    Info,
    /// Print the slot (0-16383) a key maps to. Needs no node.
    Keyslot { key: String },
    /// Get a string value.
    Get { key: String },
    /// Set a string value.
    Set {
        key: String,
        value: String,
        /// Expire after this long (e.g. 10s, 24h, 30d).
        #[arg(long, value_parser = args::duration)]
        ttl: Option<Duration>,
        /// Only if the key does not exist.
        #[arg(long, conflicts_with = "xx")]
        nx: bool,
        /// Only if the key exists.
        #[arg(long)]
        xx: bool,
    },
    /// Delete a key.
    Del { key: String },
    /// Does the key exist?
    Exists { key: String },
    /// Add to an integer value (missing = 0).
    Incrby {
        key: String,
        #[arg(allow_hyphen_values = true)]
        delta: i64,
    },
    /// Set a key's time to live ("0" or --persist removes it).
    Expire {
        key: String,
        /// Time to live from now (e.g. 30d; 0 removes it).
        #[arg(value_parser = args::duration, required_unless_present = "persist")]
        ttl: Option<Duration>,
        /// Remove the key's time to live: it never expires.
        #[arg(long, conflicts_with = "ttl")]
        persist: bool,
    },
    /// Show a key's time to live (e.g. "29d 23h 54m").
    Ttl {
        key: String,
        /// Whole seconds, as Redis's TTL: -1 no expiry, -2 no such key.
        #[arg(long)]
        raw: bool,
        /// Milliseconds, as Redis's PTTL (-1, -2 as with --raw).
        #[arg(long)]
        ms: bool,
    },
    /// Set hash fields: rush hset KEY FIELD VALUE [FIELD VALUE]...
    Hset {
        key: String,
        /// FIELD VALUE pairs.
        #[arg(required = true, num_args = 2.., value_name = "FIELD VALUE")]
        pairs: Vec<String>,
    },
    /// Get one hash field.
    Hget { key: String, field: String },
    /// Delete hash fields.
    Hdel {
        key: String,
        #[arg(required = true)]
        fields: Vec<String>,
    },
    /// Add to an integer hash field.
    Hincrby {
        key: String,
        field: String,
        #[arg(allow_hyphen_values = true)]
        delta: i64,
    },
    /// All fields of a hash, one "field value" per line.
    Hgetall { key: String },
    /// How many fields a hash has (0 when missing).
    Hlen { key: String },
    /// Purchase limits: policies, acquire, release, status.
    #[command(subcommand)]
    Limit(limits::LimitCmd),
    /// Cluster: map, nodes, create, apply, migrate slots.
    #[command(subcommand)]
    Cluster(cluster::ClusterCmd),
    /// A node's replication: role, primary, positions, lag; promote a
    /// replica.
    #[command(subcommand)]
    Replication(ReplicationCmd),
    /// Compact storage now (admin).
    Compact,
    /// The catalog: records under owners, aliases, shedding, warm-up.
    #[command(subcommand)]
    Catalog(catalog::CatalogCmd),
    /// Red envelopes: create, grab, info, refunds, audit.
    #[command(subcommand)]
    Envelope(envelope::EnvelopeCmd),
    #[command(flatten)]
    Links(links::LinksCmd),
    /// Print a shell completion script: rush completions bash > /etc/bash_completion.d/rush
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
}

/// The command line's grammar: [`Cli`], with the node options kept out of
/// the commands that need no node (a subcommand that has an argument of a
/// global's id is not given the global: clap skips it; hidden, it stays
/// out of the help).
fn command() -> clap::Command {
    let cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let hide = |names: &'static [&'static str]| {
        let hidden: Vec<clap::Arg> = globals
            .iter()
            .filter(|a| names.contains(&a.get_id().as_str()))
            .map(|a| a.clone().hide(true))
            .collect();
        move |sc: clap::Command| hidden.iter().fold(sc, |sc, a| sc.arg(a.clone()))
    };
    cmd.mut_subcommand("keyslot", hide(&NODE_OPTIONS))
        .mut_subcommand(
            "completions",
            hide(&["addr", "token", "tls_ca", "tls_name", "timeout", "json"]),
        )
}

/// Says on stderr what a retrying call waits for: on the first retry, when
/// the reason changes, and every few seconds while it lasts. `timeout` is
/// the `--timeout` given, if any.
fn retry_reporter(timeout: Option<u64>) -> RetryHook {
    const EVERY: Duration = Duration::from_secs(5);
    let last: Mutex<Option<(String, Instant)>> = Mutex::new(None);
    RetryHook::new(move |n: &RetryNotice<'_>| {
        let why = n.error.to_string();
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        let due = match &*last {
            Some((said, at)) => *said != why || at.elapsed() >= EVERY,
            None => true,
        };
        if due {
            // What bounds the wait: the --timeout given, or the default
            // for reaching --addr (HELLO) or for an answer.
            let bound = match (timeout, n.op) {
                (Some(t), _) => format!("--timeout {t}"),
                (None, "HELLO") => "give --timeout SECONDS to wait longer".to_string(),
                (None, _) => format!("--timeout {}", DEFAULT_TIMEOUT.as_secs()),
            };
            eprintln!(
                "rush: waiting for {} ({}): {why}; retrying for up to {} more ({bound})",
                n.addr,
                n.op,
                format_remaining(n.remaining)
            );
            *last = Some((why, Instant::now()));
        }
    })
}

/// What clap can't check, checked before anything is sent: a usage error
/// never reaches a node (nor waits for one).
fn check(cmd: &Cmd) -> Result<(), exit::Usage> {
    match cmd {
        Cmd::Hset { pairs, .. } if pairs.len() % 2 != 0 => Err(exit::Usage(format!(
            "hset takes FIELD VALUE pairs; {:?} has no value",
            pairs[pairs.len() - 1]
        ))),
        Cmd::Catalog(c) => catalog::check(c),
        _ => Ok(()),
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    check(&cli.command)?;
    let g = &cli.global;
    let out = Out { json: g.json };
    match &cli.command {
        Cmd::Keyslot { key } => {
            let slot = rush_client::protocol::key_slot(key.as_bytes());
            out.print(|| slot.to_string(), || json!(slot))?;
            return Ok(exit::code(exit::OK));
        }
        Cmd::Completions { shell } => {
            // Into a buffer first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut command(), "rush", &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script)?;
            return Ok(exit::code(exit::OK));
        }
        _ => {}
    }
    let tls = match &g.tls_ca {
        Some(ca) => {
            let name = g.tls_name.as_deref().unwrap_or(args::host_of(&g.addr));
            Some(rush_client::Tls::from_ca_file(ca, name)?)
        }
        None => None,
    };
    let timeout = g.timeout.map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let opts = ClientOptions {
        tls,
        token: g.token.clone(),
        client_name: "rush-cli".into(),
        connect_timeout: timeout.min(ClientOptions::default().connect_timeout),
        request_timeout: timeout,
        retry_deadline: timeout,
        seed_deadline: match g.timeout {
            Some(_) => None,
            None => Some(DEFAULT_SEED_WAIT),
        },
        on_retry: Some(retry_reporter(g.timeout)),
        ..ClientOptions::default()
    };
    let addr = g.addr.clone();
    if let Cmd::Replication(cmd) = &cli.command {
        // The node --addr names itself, not the map's owner of anything:
        // a replica's map names its primary, which may be gone.
        let c = Client::connect_with(&addr, opts).await?;
        let rows = match cmd {
            ReplicationCmd::Status => c.call_on(&addr, ReplStatus {}).await?.rows,
            ReplicationCmd::Promote => c.call_on(&addr, ReplPromote {}).await?.rows,
        };
        if matches!(cmd, ReplicationCmd::Promote) && !g.json {
            eprintln!("promoted: {addr} takes writes once it has restarted its serving (seconds)");
        }
        print_rows(&out, &rows)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Cmd::Cluster(cmd) = cli.command {
        return cluster::run(&addr, opts, cmd, out).await;
    }
    let c = Client::connect_with(&addr, opts).await?;
    let answer = |b: Option<Bytes>| -> anyhow::Result<()> {
        match b {
            Some(v) => out.print(|| show(&v), || json!(show(&v))),
            None => out.print(|| "(nil)".into(), || json!(null)),
        }
    };
    match cli.command {
        Cmd::Keyslot { .. } | Cmd::Completions { .. } | Cmd::Cluster(_) | Cmd::Replication(_) => {
            unreachable!("handled above")
        }
        Cmd::Ping => {
            c.ping().await?;
            out.print(|| "PONG".into(), || json!("PONG"))?;
        }
        Cmd::Info => print_rows(&out, &c.info().await?.rows)?,
        Cmd::Get { key } => answer(c.get(key).await?)?,
        Cmd::Set {
            key,
            value,
            ttl,
            nx,
            xx,
        } => {
            let cond = if nx {
                SetCond::IfAbsent
            } else if xx {
                SetCond::IfPresent
            } else {
                SetCond::Always
            };
            let written = c
                .set_with(key, value, ttl.unwrap_or(Duration::ZERO), cond)
                .await?;
            out.print(
                || if written { "OK" } else { "(not set)" }.into(),
                || json!(written),
            )?;
        }
        Cmd::Del { key } => {
            let n = c.del(key).await?;
            out.print(|| (n as u8).to_string(), || json!(n))?;
        }
        Cmd::Exists { key } => {
            let n = c.exists(key).await?;
            out.print(|| (n as u8).to_string(), || json!(n))?;
        }
        Cmd::Incrby { key, delta } => {
            let n = c.incr_by(key, delta).await?;
            out.print(|| n.to_string(), || json!(n))?;
        }
        Cmd::Expire { key, ttl, persist } => {
            let ttl = if persist {
                Duration::ZERO
            } else {
                ttl.unwrap_or(Duration::ZERO)
            };
            let set = c.expire(key, ttl).await?;
            out.print(|| (set as u8).to_string(), || json!(set))?;
        }
        Cmd::Ttl { key, raw, ms } => {
            let reply = c.ttl(key).await?;
            let text = || match (reply, raw || ms) {
                (TtlReply::Missing, false) => "(missing)".to_string(),
                (TtlReply::Persistent, false) => "(no expiry)".to_string(),
                (TtlReply::Remaining(left), false) => format_remaining(Duration::from_millis(left)),
                (TtlReply::Missing, true) => "-2".into(),
                (TtlReply::Persistent, true) => "-1".into(),
                (TtlReply::Remaining(left), true) if ms => left.to_string(),
                // Rounded as Redis's TTL rounds.
                (TtlReply::Remaining(left), true) => {
                    left.saturating_add(500).div_euclid(1000).to_string()
                }
            };
            let value = || match reply {
                TtlReply::Missing => json!({ "exists": false, "ttl_ms": null }),
                TtlReply::Persistent => json!({ "exists": true, "ttl_ms": null }),
                TtlReply::Remaining(left) => json!({ "exists": true, "ttl_ms": left }),
            };
            out.print(text, value)?;
        }
        Cmd::Hset { key, pairs } => {
            let fields: Vec<(Bytes, Bytes)> = pairs
                .chunks(2)
                .map(|p| (Bytes::from(p[0].clone()), Bytes::from(p[1].clone())))
                .collect();
            let n = c.hset(key, fields).await?;
            out.print(|| n.to_string(), || json!(n))?;
        }
        Cmd::Hget { key, field } => answer(c.hget(key, field).await?)?,
        Cmd::Hdel { key, fields } => {
            let n = c.hdel(key, fields).await?;
            out.print(|| n.to_string(), || json!(n))?;
        }
        Cmd::Hincrby { key, field, delta } => {
            let n = c.hincr_by(key, field, delta).await?;
            out.print(|| n.to_string(), || json!(n))?;
        }
        Cmd::Hlen { key } => {
            let n = c.hlen(key).await?;
            out.print(|| n.to_string(), || json!(n))?;
        }
        Cmd::Hgetall { key } => {
            let fields = c.hgetall(key).await?;
            if out.json {
                out.json(json!(fields
                    .iter()
                    .map(|(f, v)| (show(f), json!(show(v))))
                    .collect::<serde_json::Map<_, _>>()))?;
            } else {
                for (f, v) in &fields {
                    println!("{} {}", show(f), show(v));
                }
            }
        }
        Cmd::Limit(cmd) => return limits::run(&c, cmd, out).await,
        Cmd::Compact => {
            c.compact().await?;
            out.print(|| "OK".into(), || json!("OK"))?;
        }
        Cmd::Catalog(cmd) => return catalog::run(&c, cmd, out).await,
        Cmd::Envelope(cmd) => return envelope::run(&c, cmd, out).await,
        Cmd::Links(cmd) => return links::run(&c, cmd, out).await,
    }
    Ok(exit::code(exit::OK))
}

fn main() -> ExitCode {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return clap_exit(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e.format(&mut command())),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting runtime: {e}");
            return exit::code(exit::ERROR);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<exit::Usage>() {
            Some(u) => {
                eprintln!("error: {u}\n\nFor more information, try '--help'.");
                exit::code(exit::USAGE)
            }
            None => {
                eprintln!("error: {e:#}");
                exit::code(exit::ERROR)
            }
        },
    }
}

/// Print clap's message; `--help` and `--version` are not errors.
fn clap_exit(e: clap::Error) -> ExitCode {
    let _ = e.print();
    if e.use_stderr() {
        exit::code(exit::USAGE)
    } else {
        exit::code(exit::OK)
    }
}

#[cfg(test)]
mod tests;
