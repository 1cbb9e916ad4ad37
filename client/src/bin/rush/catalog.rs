//! `rush catalog …`: records under owners, aliases, lookups, and the admin
//! switches (shedding, warm-up, filter rebuild).
//!
//! TIME arguments are unix milliseconds, `now`, `now+DURATION` /
//! `now-DURATION` (e.g. `now+30d`), a UTC date `2026-11-29`, or an RFC 3339
//! time `2026-11-29T08:00:00Z` (any offset; milliseconds allowed): see
//! `rush_client::calendar::parse_time`.
//!
//! Queries print one record per line — `ID [key=value]…`, attributes sorted
//! by name, and `[FROM,TO)` after the id when the record has a validity
//! window (an open end is left empty) — and nothing when there are none
//! (exit 0 either way).

use crate::exit;
use crate::out::{show, Out};
use anyhow::Context;
use bytes::Bytes;
use clap::Subcommand;
use rush_client::calendar;
use rush_client::protocol::cmd::{CatalogFilter, Record, ShedMode};
use rush_client::Client;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Subcommand, Debug)]
pub enum CatalogCmd {
    /// Add or replace a record: rush catalog put OWNER RECORD_ID key=value...
    Put {
        owner: String,
        record_id: String,
        /// Attributes as key=value.
        #[arg(value_parser = pair)]
        attributes: Vec<(Bytes, Bytes)>,
        /// Valid from this TIME on (inclusive).
        #[arg(long, value_parser = time)]
        valid_from: Option<u64>,
        /// Valid until this TIME (exclusive).
        #[arg(long, value_parser = time)]
        valid_to: Option<u64>,
    },
    /// Remove a record (prints 1 if it existed, else 0).
    Delete { owner: String, record_id: String },
    /// Point an alias at an owner: rush catalog alias KIND ALIAS OWNER.
    Alias {
        kind: String,
        alias: String,
        owner: String,
    },
    /// Remove an alias (prints 1 if it existed, else 0).
    Unalias { kind: String, alias: String },
    /// Print the owner an alias points at (nothing if none).
    Resolve { kind: String, alias: String },
    /// Records of an owner: rush catalog query OWNER [key=value...] [--at TIME],
    /// or by alias: rush catalog query --alias KIND ALIAS [key=value...].
    Query {
        /// The first two arguments are an alias KIND and ALIAS, not an owner.
        #[arg(long)]
        alias: bool,
        /// Only records valid at this TIME.
        #[arg(long, value_parser = time)]
        at: Option<u64>,
        /// OWNER (or KIND ALIAS with --alias), then key=value filters.
        #[arg(required = true)]
        args: Vec<String>,
    },
    /// Shed storage reads on every shard: on, off, or auto (by queue depth). Admin.
    Shed {
        #[arg(value_parser = ["on", "off", "auto"])]
        mode: String,
    },
    /// Preload owners into the hot cache. Admin.
    Warm {
        #[arg(required = true)]
        owners: Vec<String>,
    },
    /// Rebuild every shard's Bloom filter from storage in the background. Admin.
    Rebuild,
}

pub async fn run(c: &Client, cmd: CatalogCmd, out: Out) -> anyhow::Result<ExitCode> {
    match cmd {
        CatalogCmd::Put {
            owner,
            record_id,
            attributes,
            valid_from,
            valid_to,
        } => {
            let mut record = Record::new(record_id).valid(valid_from, valid_to);
            for (k, v) in attributes {
                record = record.attr(k, v);
            }
            let created = c.catalog_put(owner, record).await?;
            out.print(
                || if created { "created" } else { "replaced" }.into(),
                || json!({ "created": created }),
            )?;
        }
        CatalogCmd::Delete { owner, record_id } => {
            let existed = c.catalog_delete(owner, record_id).await?;
            out.print(|| (existed as u8).to_string(), || json!(existed))?;
        }
        CatalogCmd::Alias { kind, alias, owner } => {
            let created = c.catalog_alias_set(kind, alias, owner).await?;
            out.print(
                || if created { "created" } else { "updated" }.into(),
                || json!({ "created": created }),
            )?;
        }
        CatalogCmd::Unalias { kind, alias } => {
            let existed = c.catalog_alias_del(kind, alias).await?;
            out.print(|| (existed as u8).to_string(), || json!(existed))?;
        }
        CatalogCmd::Resolve { kind, alias } => {
            let owner = c.catalog_resolve(kind, alias).await?;
            if out.json {
                out.json(json!(owner.as_deref().map(show)))?;
            } else if let Some(owner) = owner {
                println!("{}", show(&owner));
            }
        }
        CatalogCmd::Query { alias, at, args } => {
            let (target, filters) = query_args(alias, &args).map_err(exit::Usage)?;
            let mut filter = CatalogFilter::default();
            for (k, v) in filters {
                filter = filter.attr(k, v);
            }
            if let Some(t) = at {
                filter = filter.at(t);
            }
            let records = match target {
                (owner, None) => c.catalog_query(owner, &filter).await?,
                (kind, Some(alias)) => c.catalog_query_alias(kind, alias, &filter).await?,
            };
            if out.json {
                out.json(json!(records.iter().map(record_json).collect::<Vec<_>>()))?;
            } else {
                for r in &records {
                    println!("{}", format_record(r));
                }
            }
        }
        CatalogCmd::Shed { mode } => {
            let mode = ShedMode::parse(&mode).context("mode is on, off or auto")?;
            c.catalog_shed(mode).await?;
            out.print(|| "OK".into(), || json!("OK"))?;
        }
        CatalogCmd::Warm { owners } => {
            let r = c.catalog_warm(owners).await?;
            out.print(
                || format!("loaded {} absent {}", r.loaded, r.absent),
                || json!({ "loaded": r.loaded, "absent": r.absent }),
            )?;
        }
        CatalogCmd::Rebuild => {
            let shards = c.catalog_rebuild().await?;
            out.print(
                || format!("rebuilding on {shards} shards"),
                || json!({ "rebuilding_shards": shards }),
            )?;
        }
    }
    Ok(exit::code(exit::OK))
}

/// What clap can't check (see `check` in main).
pub fn check(cmd: &CatalogCmd) -> Result<(), exit::Usage> {
    match cmd {
        CatalogCmd::Query { alias, args, .. } => {
            query_args(*alias, args).map(|_| ()).map_err(exit::Usage)
        }
        _ => Ok(()),
    }
}

/// A query's target — (OWNER, None) or (KIND, Some(ALIAS)) — and filters.
#[allow(clippy::type_complexity)]
fn query_args(
    alias: bool,
    args: &[String],
) -> Result<((String, Option<String>), Vec<(Bytes, Bytes)>), String> {
    let (target, filters) = match (alias, args) {
        (true, [kind, alias, filters @ ..]) => ((kind.clone(), Some(alias.clone())), filters),
        (true, _) => return Err("query --alias needs KIND ALIAS, then key=value filters".into()),
        (false, [owner, filters @ ..]) => ((owner.clone(), None), filters),
        (false, []) => return Err("query needs an OWNER".into()),
    };
    let filters = filters.iter().map(|f| pair(f)).collect::<Result<_, _>>()?;
    Ok((target, filters))
}

/// A `key=value` argument (the value may contain `=`; the key may not be
/// empty).
fn pair(a: &str) -> Result<(Bytes, Bytes), String> {
    match a.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((
            Bytes::copy_from_slice(k.as_bytes()),
            Bytes::copy_from_slice(v.as_bytes()),
        )),
        _ => Err(format!("{a:?} is not key=value")),
    }
}

/// A TIME argument (see the module docs), `now` being this machine's clock.
fn time(s: &str) -> Result<u64, String> {
    calendar::parse_time(s, now_ms())
}

fn record_json(r: &Record) -> Value {
    let time = |t: Option<u64>| t.map(calendar::timestamp_exact);
    json!({
        "id": show(&r.id),
        "valid_from_ms": r.valid_from,
        "valid_from": time(r.valid_from),
        "valid_to_ms": r.valid_to,
        "valid_to": time(r.valid_to),
        "attributes": r.attributes.iter()
            .map(|(k, v)| (show(k), json!(show(v))))
            .collect::<serde_json::Map<_, _>>(),
    })
}

/// `ID [FROM,TO) key=value…`
fn format_record(r: &Record) -> String {
    let mut line = String::from_utf8_lossy(&r.id).into_owned();
    if r.valid_from.is_some() || r.valid_to.is_some() {
        line.push_str(&format!(
            " [{},{})",
            r.valid_from
                .map(calendar::timestamp_exact)
                .unwrap_or_default(),
            r.valid_to
                .map(calendar::timestamp_exact)
                .unwrap_or_default()
        ));
    }
    for (k, v) in &r.attributes {
        line.push(' ');
        line.push_str(&String::from_utf8_lossy(k));
        line.push('=');
        line.push_str(&String::from_utf8_lossy(v));
    }
    line
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines() {
        let r = Record::new("c1")
            .attr("plan", "gold")
            .attr("region", "eu west")
            .valid(Some(0), None);
        assert_eq!(
            format_record(&r),
            "c1 [1970-01-01T00:00:00Z,) plan=gold region=eu west"
        );
        assert_eq!(format_record(&Record::new("x")), "x");
        assert!(pair("=v").is_err());
        assert!(pair("novalue").is_err());
        assert_eq!(pair("a=b=c").unwrap().1, Bytes::from("b=c"));
    }
}
