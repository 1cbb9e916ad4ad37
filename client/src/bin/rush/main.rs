//! `rush`: the command-line client. Exit code 0 on success, 1 on error (and,
//! for commands that can be denied, 2 when denied; `envelope audit` 3 when
//! books are off).

mod envelope;

mod catalog;
mod cluster;
mod limits;

mod links;

use bytes::Bytes;
use clap::{Parser, Subcommand};
use rush_client::protocol::cmd::{SetCond, TtlReply};
use rush_client::{format_duration, parse_duration, Client, ClientOptions};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "rush", version, about = "Command-line client for rushd")]
struct Cli {
    /// Any node's address: requests are routed to the node serving their
    /// slot (the map is loaded from this node).
    #[arg(
        long,
        env = "RUSH_ADDR",
        default_value = "127.0.0.1:7379",
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
    /// Seconds to wait for an answer.
    #[arg(long, default_value_t = 30, global = true)]
    timeout: u64,
    #[command(subcommand)]
    command: Cmd,
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
        #[arg(long)]
        ttl: Option<String>,
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
        ttl: Option<String>,
        #[arg(long, conflicts_with = "ttl")]
        persist: bool,
    },
    /// Show a key's time to live.
    Ttl { key: String },
    /// Set hash fields: rush hset KEY FIELD VALUE [FIELD VALUE]...
    Hset {
        key: String,
        #[arg(required = true, num_args = 2..)]
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
    /// Purchase limits: policies, acquire, release, status.
    #[command(subcommand)]
    Limit(limits::LimitCmd),
    /// Cluster: map, nodes, create, apply, migrate slots.
    #[command(subcommand)]
    Cluster(cluster::ClusterCmd),
    /// Compact storage now (admin).
    Compact,
    /// Catalog lookups: records under owners, aliases, shedding, warm-up.
    #[command(subcommand)]
    Catalog(catalog::CatalogCmd),
    /// Red envelopes: create, grab, info, refunds, audit.
    #[command(subcommand)]
    Envelope(envelope::EnvelopeCmd),
    #[command(flatten)]
    Links(links::LinksCmd),
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn duration_arg(s: &str) -> anyhow::Result<Duration> {
    parse_duration(s).map_err(anyhow::Error::msg)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Cmd::Keyslot { key } = &cli.command {
        println!("{}", rush_client::protocol::key_slot(key.as_bytes()));
        return Ok(ExitCode::SUCCESS);
    }
    let tls = match &cli.tls_ca {
        Some(ca) => {
            let host = cli
                .addr
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(&cli.addr);
            let name = cli.tls_name.as_deref().unwrap_or(host);
            Some(rush_client::Tls::from_ca_file(ca, name)?)
        }
        None => None,
    };
    let opts = ClientOptions {
        tls,
        token: cli.token.clone(),
        client_name: "rush-cli".into(),
        request_timeout: Duration::from_secs(cli.timeout),
        ..ClientOptions::default()
    };
    if let Cmd::Cluster(cmd) = cli.command {
        return cluster::run(&cli.addr, opts, cmd).await;
    }
    let c = Client::connect_with(&cli.addr, opts).await?;
    match cli.command {
        Cmd::Keyslot { .. } => unreachable!("handled above"),
        Cmd::Ping => {
            c.ping().await?;
            println!("PONG");
        }
        Cmd::Info => {
            for (k, v) in c.info().await?.rows {
                println!("{k}: {v}");
            }
        }
        Cmd::Get { key } => match c.get(key).await? {
            Some(v) => println!("{}", show(&v)),
            None => println!("(nil)"),
        },
        Cmd::Set {
            key,
            value,
            ttl,
            nx,
            xx,
        } => {
            let ttl = ttl
                .as_deref()
                .map(duration_arg)
                .transpose()?
                .unwrap_or(Duration::ZERO);
            let cond = if nx {
                SetCond::IfAbsent
            } else if xx {
                SetCond::IfPresent
            } else {
                SetCond::Always
            };
            let written = c.set_with(key, value, ttl, cond).await?;
            println!("{}", if written { "OK" } else { "(not set)" });
        }
        Cmd::Del { key } => println!("{}", c.del(key).await? as u8),
        Cmd::Exists { key } => println!("{}", c.exists(key).await? as u8),
        Cmd::Incrby { key, delta } => println!("{}", c.incr_by(key, delta).await?),
        Cmd::Expire { key, ttl, persist } => {
            let ttl = match (ttl, persist) {
                (_, true) => Duration::ZERO,
                (Some(t), false) => duration_arg(&t)?,
                (None, false) => anyhow::bail!("give a TTL (e.g. 30d) or --persist"),
            };
            println!("{}", c.expire(key, ttl).await? as u8);
        }
        Cmd::Ttl { key } => match c.ttl(key).await? {
            TtlReply::Missing => println!("(missing)"),
            TtlReply::Persistent => println!("(no expiry)"),
            TtlReply::Remaining(ms) => println!("{}", format_duration(Duration::from_millis(ms))),
        },
        Cmd::Hset { key, pairs } => {
            if pairs.len() % 2 != 0 {
                anyhow::bail!("hset takes FIELD VALUE pairs");
            }
            let fields: Vec<(Bytes, Bytes)> = pairs
                .chunks(2)
                .map(|p| (Bytes::from(p[0].clone()), Bytes::from(p[1].clone())))
                .collect();
            println!("{}", c.hset(key, fields).await?);
        }
        Cmd::Hget { key, field } => match c.hget(key, field).await? {
            Some(v) => println!("{}", show(&v)),
            None => println!("(nil)"),
        },
        Cmd::Hdel { key, fields } => println!("{}", c.hdel(key, fields).await?),
        Cmd::Hincrby { key, field, delta } => println!("{}", c.hincr_by(key, field, delta).await?),
        Cmd::Hgetall { key } => {
            for (f, v) in c.hgetall(key).await? {
                println!("{} {}", show(&f), show(&v));
            }
        }
        Cmd::Limit(cmd) => return limits::run(&c, cmd).await,
        Cmd::Cluster(_) => unreachable!("handled above"),
        Cmd::Compact => {
            c.compact().await?;
            println!("OK");
        }
        Cmd::Catalog(cmd) => return catalog::run(&c, cmd).await,
        Cmd::Envelope(cmd) => return envelope::run(&c, cmd).await,
        Cmd::Links(cmd) => return links::run(&c, cmd).await,
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
