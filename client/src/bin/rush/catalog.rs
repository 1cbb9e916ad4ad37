//! `rush catalog …`: records under owners, aliases, lookups, and the admin
//! switches (shedding, warm-up, filter rebuild).
//!
//! TIME arguments are unix milliseconds, `now`, `now+DURATION` /
//! `now-DURATION` (e.g. `now+30d`), or a UTC date `2026-11-29` /
//! `2026-11-29T08:00:00Z` (`.123` milliseconds allowed).
//!
//! Queries print one record per line — `ID [key=value]…`, attributes sorted
//! by name, and `[FROM,TO)` after the id when the record has a validity
//! window (an open end is left empty) — and nothing when there are none
//! (exit 0 either way).

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Subcommand;
use rush_client::calendar::{civil_from_days, days_from_civil};
use rush_client::parse_duration;
use rush_client::protocol::cmd::{CatalogFilter, Record, ShedMode};
use rush_client::Client;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Subcommand, Debug)]
pub enum CatalogCmd {
    /// Add or replace a record: rush catalog put OWNER RECORD_ID key=value...
    Put {
        owner: String,
        record_id: String,
        /// Attributes as key=value.
        attributes: Vec<String>,
        /// Valid from this TIME on (inclusive).
        #[arg(long)]
        valid_from: Option<String>,
        /// Valid until this TIME (exclusive).
        #[arg(long)]
        valid_to: Option<String>,
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
        #[arg(long)]
        at: Option<String>,
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

pub async fn run(c: &Client, cmd: CatalogCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        CatalogCmd::Put {
            owner,
            record_id,
            attributes,
            valid_from,
            valid_to,
        } => {
            let mut record = Record::new(record_id).valid(
                valid_from.as_deref().map(parse_time).transpose()?,
                valid_to.as_deref().map(parse_time).transpose()?,
            );
            for (k, v) in pairs(&attributes)? {
                record = record.attr(k, v);
            }
            let created = c.catalog_put(owner, record).await?;
            println!("{}", if created { "created" } else { "replaced" });
        }
        CatalogCmd::Delete { owner, record_id } => {
            println!("{}", c.catalog_delete(owner, record_id).await? as u8)
        }
        CatalogCmd::Alias { kind, alias, owner } => {
            let created = c.catalog_alias_set(kind, alias, owner).await?;
            println!("{}", if created { "created" } else { "updated" });
        }
        CatalogCmd::Unalias { kind, alias } => {
            println!("{}", c.catalog_alias_del(kind, alias).await? as u8)
        }
        CatalogCmd::Resolve { kind, alias } => {
            if let Some(owner) = c.catalog_resolve(kind, alias).await? {
                println!("{}", String::from_utf8_lossy(&owner));
            }
        }
        CatalogCmd::Query { alias, at, args } => {
            let (target, filters) = if alias {
                if args.len() < 2 {
                    bail!("--alias needs KIND ALIAS");
                }
                ((args[0].clone(), Some(args[1].clone())), &args[2..])
            } else {
                ((args[0].clone(), None), &args[1..])
            };
            let mut filter = CatalogFilter::default();
            for (k, v) in pairs(filters)? {
                filter = filter.attr(k, v);
            }
            if let Some(t) = at {
                filter = filter.at(parse_time(&t)?);
            }
            let records = match target {
                (owner, None) => c.catalog_query(owner, &filter).await?,
                (kind, Some(alias)) => c.catalog_query_alias(kind, alias, &filter).await?,
            };
            for r in &records {
                println!("{}", format_record(r));
            }
        }
        CatalogCmd::Shed { mode } => {
            let mode = ShedMode::parse(&mode).context("mode is on, off or auto")?;
            c.catalog_shed(mode).await?;
            println!("OK");
        }
        CatalogCmd::Warm { owners } => {
            let r = c.catalog_warm(owners).await?;
            println!("loaded {} absent {}", r.loaded, r.absent);
        }
        CatalogCmd::Rebuild => {
            let shards = c.catalog_rebuild().await?;
            println!("rebuilding on {shards} shards");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `key=value` arguments (the value may contain `=`; the key may not be empty).
fn pairs(args: &[String]) -> anyhow::Result<Vec<(Bytes, Bytes)>> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((
                Bytes::copy_from_slice(k.as_bytes()),
                Bytes::copy_from_slice(v.as_bytes()),
            )),
            _ => bail!("{a:?} is not key=value"),
        })
        .collect()
}

/// `ID [FROM,TO) key=value…`
fn format_record(r: &Record) -> String {
    let mut line = String::from_utf8_lossy(&r.id).into_owned();
    if r.valid_from.is_some() || r.valid_to.is_some() {
        line.push_str(&format!(
            " [{},{})",
            r.valid_from.map(format_time).unwrap_or_default(),
            r.valid_to.map(format_time).unwrap_or_default()
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

/// Parse a TIME argument (see the module docs) to unix milliseconds.
pub fn parse_time(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<u64>() {
        return Ok(ms);
    }
    if let Some(rest) = s.strip_prefix("now") {
        let now = now_ms();
        if rest.is_empty() {
            return Ok(now);
        }
        let (sign, dur) = rest.split_at(1);
        let d = parse_duration(dur).map_err(anyhow::Error::msg)?.as_millis() as u64;
        return match sign {
            "+" => Ok(now.saturating_add(d)),
            "-" => now.checked_sub(d).context("before 1970"),
            _ => bail!("{s:?}: use now, now+DURATION or now-DURATION"),
        };
    }
    parse_utc(s).with_context(|| {
        format!("{s:?} is not a time (unix ms, now, now+30d, 2026-11-29 or 2026-11-29T08:00:00Z)")
    })
}

/// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.mmm]Z`, UTC.
fn parse_utc(s: &str) -> Option<u64> {
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t.strip_suffix('Z')?)),
        None => (s, None),
    };
    let mut d = date.splitn(3, '-');
    let (y, m, day): (i64, u32, u32) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut ms = 0u64;
    if let Some(t) = time {
        let (hms, frac) = match t.split_once('.') {
            Some((a, f)) if f.len() == 3 => (a, f.parse::<u64>().ok()?),
            Some(_) => return None,
            None => (t, 0),
        };
        let mut p = hms.splitn(3, ':');
        let (h, mi, sec): (u64, u64, u64) = (
            p.next()?.parse().ok()?,
            p.next()?.parse().ok()?,
            p.next()?.parse().ok()?,
        );
        if h > 23 || mi > 59 || sec > 59 {
            return None;
        }
        ms = ((h * 60 + mi) * 60 + sec) * 1000 + frac;
    }
    let days = days_from_civil(y, m, day);
    let (cy, cm, cd) = civil_from_days(days);
    if (cy, cm, cd) != (y, m, day) {
        return None; // 2026-02-30 and the like
    }
    Some(days as u64 * 86_400_000 + ms)
}

/// Unix ms as `YYYY-MM-DDTHH:MM:SS[.mmm]Z`.
pub fn format_time(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    let rest = ms % 86_400_000;
    let (y, m, d) = civil_from_days(days);
    let (h, mi, s, frac) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    if frac == 0 {
        format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:03}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("0").unwrap(), 0);
        assert_eq!(parse_time("1970-01-02").unwrap(), 86_400_000);
        assert_eq!(
            parse_time("2026-11-29T08:00:00Z").unwrap(),
            1_795_910_400_000 + 8 * 3_600_000
        );
        assert_eq!(
            parse_time("2000-02-29T00:00:00.250Z").unwrap(),
            951_782_400_250
        );
        assert!(parse_time("2026-02-30").is_err());
        assert!(parse_time("2026-11-29T08:00:00").is_err());
        assert!(parse_time("yesterday").is_err());
        let now = now_ms();
        let later = parse_time("now+1h").unwrap();
        assert!(later >= now + 3_600_000 && later < now + 3_700_000);
        for ms in [0, 951_782_400_250, 1_795_910_400_000, 4_102_444_800_000] {
            assert_eq!(parse_time(&format_time(ms)).unwrap(), ms);
        }
        assert_eq!(format_time(86_400_000), "1970-01-02T00:00:00Z");
    }

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
        assert!(pairs(&["=v".into()]).is_err());
        assert_eq!(pairs(&["a=b=c".into()]).unwrap()[0].1, Bytes::from("b=c"));
    }
}
