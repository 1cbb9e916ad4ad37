//! `rush envelope …`: red envelopes.
//!
//! Exit codes: 0 done (a grab granted, or repeated), 2 a grab denied (EMPTY,
//! EXPIRED, BUSY), 3 an audit found books that are off, 1 any other error,
//! 64 a bad command line.

use crate::exit;
use crate::out::{self, show, Out};
use clap::Subcommand;
use rush_client::protocol::cmd::{EnvelopeCreate, EnvelopeInfoReply, EnvelopeMode, RefundCursor};
use rush_client::protocol::ErrorCode;
use rush_client::{calendar, Client};
use serde_json::json;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum EnvelopeCmd {
    /// Create an envelope; prints its id.
    Create {
        /// Who pays (and gets the refund). Its slot is the envelope's slot.
        #[arg(long)]
        sender: String,
        /// Total in cents (at least one per share).
        #[arg(long, allow_hyphen_values = true, value_parser = whole::<u64>)]
        total: u64,
        /// Number of shares.
        #[arg(long, allow_hyphen_values = true, value_parser = whole::<u32>)]
        count: u32,
        /// random (double average) or fixed (equal shares).
        #[arg(long, default_value = "random")]
        mode: EnvelopeMode,
        /// Expire after this long (e.g. 30m, 24h); the rest is refunded.
        #[arg(long, default_value = "24h", value_parser = crate::args::duration)]
        expires: Duration,
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

/// A whole number (no sign, no fraction).
fn whole<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a whole number"));
    }
    t.parse().map_err(|_| format!("{s:?} is too large"))
}

pub async fn run(c: &Client, cmd: EnvelopeCmd, out: Out) -> anyhow::Result<ExitCode> {
    match cmd {
        EnvelopeCmd::Create {
            sender,
            total,
            count,
            mode,
            expires,
            idempotency_key,
        } => {
            let reply = c
                .envelope_create(EnvelopeCreate {
                    sender: sender.into(),
                    total_cents: total,
                    count,
                    mode,
                    expires_in_ms: expires.as_millis().clamp(1, u64::MAX as u128) as u64,
                    idempotency_key: idempotency_key.map(Into::into),
                })
                .await?;
            out.print(
                || reply.id.to_string(),
                || {
                    json!({
                        "id": reply.id,
                        "expires_at_ms": reply.expires_at_ms,
                        "expires_at": out::time(reply.expires_at_ms),
                    })
                },
            )?;
        }
        EnvelopeCmd::Grab { id, user } => match c.envelope_grab(id, user).await {
            Ok(g) => {
                out.print(
                    || g.amount_cents.to_string(),
                    || {
                        json!({
                            "granted": true,
                            "amount_cents": g.amount_cents,
                            "repeated": g.repeated,
                        })
                    },
                )?;
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
                if out.json {
                    let code = e.code().map(|c| c.name());
                    out.json(
                        json!({ "granted": false, "denied": code, "message": e.to_string() }),
                    )?;
                }
                eprintln!("{e}");
                return Ok(exit::code(exit::DENIED));
            }
            Err(e) => return Err(e.into()),
        },
        EnvelopeCmd::Info { id } => {
            let i = c.envelope_info(id).await?;
            out.print(|| info_text(&i), || info_json(&i))?;
        }
        EnvelopeCmd::Refunds { from, limit, ack } => {
            let page = c.envelope_refunds(from, limit).await?;
            let acknowledged = if ack {
                Some(c.envelope_refunds_ack(page.next).await?)
            } else {
                None
            };
            if out.json {
                out.json(json!({
                    "refunds": page.refunds.iter().map(|r| json!({
                        "cursor": r.cursor.to_string(),
                        "envelope": r.envelope_id(),
                        "sender": show(&r.sender),
                        "amount_cents": r.amount_cents,
                        "refunded_at_ms": r.refunded_at_ms,
                        "refunded_at": out::time(r.refunded_at_ms),
                    })).collect::<Vec<_>>(),
                    "next": page.next.to_string(),
                    "more": page.more,
                    "acknowledged": acknowledged,
                }))?;
            } else {
                for r in &page.refunds {
                    println!(
                        "{} envelope {} sender {} cents {} at {}",
                        r.cursor,
                        r.envelope_id(),
                        show(&r.sender),
                        r.amount_cents,
                        calendar::timestamp(r.refunded_at_ms)
                    );
                }
                println!("next {}{}", page.next, if page.more { " more" } else { "" });
                if let Some(n) = acknowledged {
                    println!("acknowledged {n}");
                }
            }
        }
        EnvelopeCmd::Ack { cursor } => {
            let n = c.envelope_refunds_ack(cursor).await?;
            out.print(
                || format!("acknowledged {n}"),
                || json!({ "acknowledged": n }),
            )?;
        }
        EnvelopeCmd::Audit => {
            let a = c.envelope_audit().await?;
            out.print(
                || {
                    let mut text =
                        format!(
                        "envelopes {} grabs {} open {} in_flight_cents {} refunded {} problems {}",
                        a.envelopes, a.grabs, a.open, a.in_flight_cents, a.refunded, a.problem_count
                    );
                    for p in &a.problems {
                        text.push_str(&format!("\nproblem: {p}"));
                    }
                    text
                },
                || {
                    json!({
                        "ok": a.ok(),
                        "envelopes": a.envelopes,
                        "grabs": a.grabs,
                        "open": a.open,
                        "in_flight_cents": a.in_flight_cents,
                        "refunded": a.refunded,
                        "problem_count": a.problem_count,
                        "problems": a.problems,
                    })
                },
            )?;
            if !a.ok() {
                return Ok(exit::code(exit::BOOKS_OFF));
            }
        }
    }
    Ok(exit::code(exit::OK))
}

fn info_text(i: &EnvelopeInfoReply) -> String {
    let mut lines = vec![
        format!("id: {}", i.id),
        format!("sender: {}", show(&i.sender)),
        format!("mode: {}", i.mode.name()),
        format!("state: {}", i.state.name()),
        format!("total_cents: {}", i.total_cents),
        format!("remaining_cents: {}", i.remaining_cents),
        format!("refunded_cents: {}", i.refunded_cents),
        format!("count: {}", i.count),
        format!("grabbed: {}", i.grabbed),
        format!("created: {}", calendar::timestamp(i.created_at_ms)),
        format!("expires: {}", calendar::timestamp(i.expires_at_ms)),
    ];
    for g in &i.grabs {
        lines.push(format!(
            "grab: {} {} {}",
            show(&g.user),
            g.amount_cents,
            calendar::timestamp(g.at_ms)
        ));
    }
    lines.join("\n")
}

fn info_json(i: &EnvelopeInfoReply) -> serde_json::Value {
    json!({
        "id": i.id,
        "sender": show(&i.sender),
        "mode": i.mode.name(),
        "state": i.state.name(),
        "total_cents": i.total_cents,
        "remaining_cents": i.remaining_cents,
        "refunded_cents": i.refunded_cents,
        "count": i.count,
        "grabbed": i.grabbed,
        "created_at_ms": i.created_at_ms,
        "created_at": out::time(i.created_at_ms),
        "expires_at_ms": i.expires_at_ms,
        "expires_at": out::time(i.expires_at_ms),
        "grabs": i.grabs.iter().map(|g| json!({
            "user": show(&g.user),
            "amount_cents": g.amount_cents,
            "at_ms": g.at_ms,
            "at": out::time(g.at_ms),
        })).collect::<Vec<_>>(),
    })
}
