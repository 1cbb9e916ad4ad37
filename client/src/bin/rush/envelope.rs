//! `rush envelope …`: red envelopes.
//!
//! Exit codes: 0 done (a grab granted, or repeated), 2 a grab denied (EMPTY,
//! EXPIRED, BUSY), 3 an audit found books that are off, 1 any other error.

use clap::Subcommand;
use rush_client::protocol::cmd::{EnvelopeCreate, EnvelopeMode, RefundCursor};
use rush_client::protocol::ErrorCode;
use rush_client::{parse_duration, Client};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum EnvelopeCmd {
    /// Create an envelope; prints its id.
    Create {
        /// Who pays (and gets the refund). Its slot is the envelope's slot.
        #[arg(long)]
        sender: String,
        /// Total in cents (at least one per share).
        #[arg(long, allow_hyphen_values = true)]
        total: String,
        /// Number of shares.
        #[arg(long, allow_hyphen_values = true)]
        count: String,
        /// random (double average) or fixed (equal shares).
        #[arg(long, default_value = "random")]
        mode: EnvelopeMode,
        /// Expire after this long (e.g. 30m, 24h); the rest is refunded.
        #[arg(long, default_value = "24h")]
        expires: String,
        /// Makes the create safe to retry: the same key returns the same id.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Grab a share; prints the amount in cents. Exit 2 if EMPTY, EXPIRED or BUSY.
    Grab { id: u64, user: String },
    /// An envelope's books and grabs.
    Info { id: u64 },
    /// Read the refund stream (admin): one line per refund, then the next cursor.
    Refunds {
        /// Cursor to read after (STAMP-ID), as printed by a previous read.
        #[arg(long, default_value = "0-0")]
        from: RefundCursor,
        /// Most refunds to print.
        #[arg(long, default_value_t = 1000)]
        limit: u32,
        /// Acknowledge what was printed (paid): it leaves the stream.
        #[arg(long)]
        ack: bool,
    },
    /// Acknowledge refunds up to a cursor as paid (admin).
    Ack { cursor: RefundCursor },
    /// Check every envelope's books (admin). Exit 3 if any is off.
    Audit,
}

fn cents(name: &str, s: &str) -> anyhow::Result<u64> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| anyhow::anyhow!("--{name} must be a whole number of cents, not {s:?}"))
}

pub async fn run(c: &Client, cmd: EnvelopeCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        EnvelopeCmd::Create {
            sender,
            total,
            count,
            mode,
            expires,
            idempotency_key,
        } => {
            let total = cents("total", &total)?;
            let count: u32 = count
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--count must be a whole number, not {count:?}"))?;
            let expires = parse_duration(&expires).map_err(anyhow::Error::msg)?;
            let reply = c
                .envelope_create(EnvelopeCreate {
                    sender: sender.into(),
                    total_cents: total,
                    count,
                    mode,
                    expires_in_ms: expires.as_millis().max(1) as u64,
                    idempotency_key: idempotency_key.map(Into::into),
                })
                .await?;
            println!("{}", reply.id);
        }
        EnvelopeCmd::Grab { id, user } => match c.envelope_grab(id, user).await {
            Ok(g) => {
                println!("{}", g.amount_cents);
                if g.repeated {
                    eprintln!("(already grabbed: the same amount as before)");
                }
            }
            Err(e)
                if matches!(
                    e.code(),
                    Some(ErrorCode::Empty | ErrorCode::Expired | ErrorCode::Busy)
                ) =>
            {
                eprintln!("{e}");
                return Ok(ExitCode::from(2));
            }
            Err(e) => return Err(e.into()),
        },
        EnvelopeCmd::Info { id } => {
            let i = c.envelope_info(id).await?;
            println!("id: {}", i.id);
            println!("sender: {}", String::from_utf8_lossy(&i.sender));
            println!("mode: {}", i.mode.name());
            println!("state: {}", i.state.name());
            println!("total_cents: {}", i.total_cents);
            println!("remaining_cents: {}", i.remaining_cents);
            println!("refunded_cents: {}", i.refunded_cents);
            println!("count: {}", i.count);
            println!("grabbed: {}", i.grabbed);
            println!("created_at_ms: {}", i.created_at_ms);
            println!("expires_at_ms: {}", i.expires_at_ms);
            for g in i.grabs {
                println!(
                    "grab: {} {} {}",
                    String::from_utf8_lossy(&g.user),
                    g.amount_cents,
                    g.at_ms
                );
            }
        }
        EnvelopeCmd::Refunds { from, limit, ack } => {
            let page = c.envelope_refunds(from, limit).await?;
            for r in &page.refunds {
                println!(
                    "{} envelope {} sender {} cents {} at {}",
                    r.cursor,
                    r.envelope_id(),
                    String::from_utf8_lossy(&r.sender),
                    r.amount_cents,
                    r.refunded_at_ms
                );
            }
            println!("next {}{}", page.next, if page.more { " more" } else { "" });
            if ack {
                let n = c.envelope_refunds_ack(page.next).await?;
                println!("acknowledged {n}");
            }
        }
        EnvelopeCmd::Ack { cursor } => {
            println!("acknowledged {}", c.envelope_refunds_ack(cursor).await?);
        }
        EnvelopeCmd::Audit => {
            let a = c.envelope_audit().await?;
            println!(
                "envelopes {} grabs {} open {} in_flight_cents {} refunded {} problems {}",
                a.envelopes, a.grabs, a.open, a.in_flight_cents, a.refunded, a.problem_count
            );
            for p in &a.problems {
                println!("problem: {p}");
            }
            if !a.ok() {
                return Ok(ExitCode::from(3));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
