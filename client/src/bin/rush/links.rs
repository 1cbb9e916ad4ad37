//! `rush shorten`, `rush resolve`, `rush link info|update|delete|qr`.

use crate::exit;
use crate::out::{self, show, Out};
use anyhow::Context;
use bytes::Bytes;
use clap::{Args, Subcommand};
use rush_client::protocol::cmd::{AppLinkChange, LinkInfoReply, LinkShorten, LinkUpdate};
use rush_client::{calendar, format_duration, parse_duration, Client};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum LinksCmd {
    /// Shorten a URL; prints the short URL (base URL + code).
    Shorten(ShortenArgs),
    /// Print a code's target (counts a visit).
    Resolve { code: String },
    /// Inspect, change, delete a link, or make its QR code.
    #[command(subcommand)]
    Link(LinkCmd),
}

#[derive(Args, Debug)]
pub struct ShortenArgs {
    url: String,
    /// Time to live, sliding with visits (e.g. 30d, 100d, 1y, or "none").
    #[arg(long, value_parser = ttl_ms)]
    ttl: Option<u64>,
    /// Code length, 5-8 (default: the server's).
    #[arg(long)]
    len: Option<u8>,
    /// A custom code instead of a generated one (a new link: CONFLICT if
    /// the code is taken).
    #[arg(long, conflicts_with = "reuse")]
    alias: Option<String>,
    /// App URL opened on iOS devices.
    #[arg(long)]
    ios: Option<String>,
    /// App URL opened on Android devices.
    #[arg(long)]
    android: Option<String>,
    /// Account / tenant tag.
    #[arg(long, default_value = "")]
    account: String,
    /// Return the live code an earlier --reuse shorten of this URL and
    /// account made, if any (not with --alias: an alias names a new link).
    #[arg(long)]
    reuse: bool,
    /// Redirect with 301 (permanent) instead of 302.
    #[arg(long)]
    permanent: bool,
    /// Drop a visit's query string (/CODE?utm_source=x) instead of passing
    /// it on to the target.
    #[arg(long)]
    no_query_passthrough: bool,
}

#[derive(Subcommand, Debug)]
pub enum LinkCmd {
    /// Target, dates and visit statistics.
    Info { code: String },
    /// Change the target, TTL, app links, redirect kind or query passthrough.
    Update {
        code: String,
        /// New target URL.
        #[arg(long)]
        url: Option<String>,
        /// New TTL from now (e.g. 30d, or "none").
        #[arg(long, value_parser = ttl_ms)]
        ttl: Option<u64>,
        /// New app URL opened on iOS devices.
        #[arg(long, conflicts_with = "no_ios")]
        ios: Option<String>,
        /// Remove the iOS app link.
        #[arg(long)]
        no_ios: bool,
        /// New app URL opened on Android devices.
        #[arg(long, conflicts_with = "no_android")]
        android: Option<String>,
        /// Remove the Android app link.
        #[arg(long)]
        no_android: bool,
        /// Redirect with 301 from now on.
        #[arg(long, conflicts_with = "temporary")]
        permanent: bool,
        /// Redirect with 302 from now on.
        #[arg(long)]
        temporary: bool,
        /// Pass a visit's query string on to the target from now on.
        #[arg(long, conflicts_with = "no_query_passthrough")]
        query_passthrough: bool,
        /// Drop a visit's query string from now on.
        #[arg(long)]
        no_query_passthrough: bool,
    },
    /// Delete a link.
    Delete { code: String },
    /// Write the QR code of the short URL (PNG, or SVG for *.svg / --svg).
    Qr {
        code: String,
        /// The file to write (PNG unless it ends in .svg or --svg is given).
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
        /// Write SVG whatever the file's name.
        #[arg(long)]
        svg: bool,
    },
}

/// `none`/`never`/`0` → no expiry (0), else a duration in ms.
fn ttl_ms(s: &str) -> Result<u64, String> {
    match s {
        "none" | "never" | "0" => Ok(0),
        s => Ok(parse_duration(s)?
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX)),
    }
}

fn app_change(set: Option<String>, clear: bool) -> AppLinkChange {
    match (set, clear) {
        (Some(u), _) => AppLinkChange::Set(u),
        (None, true) => AppLinkChange::Clear,
        (None, false) => AppLinkChange::Keep,
    }
}

/// A pair of opposite flags (clap refuses both): `Some(true)` for `on`,
/// `Some(false)` for `off`, `None` for neither (keep).
fn switch(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

pub async fn run(c: &Client, cmd: LinksCmd, out: Out) -> anyhow::Result<ExitCode> {
    match cmd {
        LinksCmd::Shorten(a) => {
            let reply = c
                .shorten_with(LinkShorten {
                    url: a.url,
                    account: Bytes::from(a.account),
                    length: a.len.unwrap_or(0),
                    ttl_ms: a.ttl,
                    alias: a.alias,
                    ios: a.ios,
                    android: a.android,
                    reuse: a.reuse,
                    permanent: a.permanent,
                    drop_query: a.no_query_passthrough,
                })
                .await?;
            out.print(
                || reply.short_url.clone(),
                || {
                    json!({
                        "code": reply.code,
                        "short_url": reply.short_url,
                        "reused": reply.reused,
                        "expires_at_ms": reply.expires_at,
                        "expires_at": out::time(reply.expires_at),
                    })
                },
            )?;
        }
        LinksCmd::Resolve { code } => {
            let r = c.resolve(code).await?;
            out.print(
                || r.target.clone(),
                || {
                    json!({
                        "target": r.target,
                        "ios": r.ios,
                        "android": r.android,
                        "redirect": if r.permanent { 301 } else { 302 },
                        "query_passthrough": !r.drop_query,
                        "expires_at_ms": r.expires_at,
                        "expires_at": out::time(r.expires_at),
                    })
                },
            )?;
        }
        LinksCmd::Link(LinkCmd::Info { code }) => {
            let i = c.link_info(code).await?;
            out.print(|| info_text(&i), || info_json(&i))?;
        }
        LinksCmd::Link(LinkCmd::Update {
            code,
            url,
            ttl,
            ios,
            no_ios,
            android,
            no_android,
            permanent,
            temporary,
            query_passthrough,
            no_query_passthrough,
        }) => {
            let expires = c
                .link_update(LinkUpdate {
                    code,
                    url,
                    ttl_ms: ttl,
                    ios: app_change(ios, no_ios),
                    android: app_change(android, no_android),
                    permanent: switch(permanent, temporary),
                    drop_query: switch(no_query_passthrough, query_passthrough),
                })
                .await?;
            out.print(
                || format!("OK expires {}", out::when(expires)),
                || json!({ "expires_at_ms": expires, "expires_at": out::time(expires) }),
            )?;
        }
        LinksCmd::Link(LinkCmd::Delete { code }) => {
            let deleted = c.link_delete(code).await?;
            out.print(
                || if deleted { "deleted" } else { "(not found)" }.into(),
                || json!(deleted),
            )?;
        }
        LinksCmd::Link(LinkCmd::Qr {
            code,
            out: path,
            svg,
        }) => {
            let url = c.link_info(code).await?.short_url;
            write_qr(&url, &path, svg)?;
            out.print(
                || format!("{} -> {}", url, path.display()),
                || json!({ "short_url": url, "file": path.display().to_string() }),
            )?;
        }
    }
    Ok(exit::code(exit::OK))
}

fn write_qr(url: &str, path: &std::path::Path, svg: bool) -> anyhow::Result<()> {
    let qr = qrcode::QrCode::with_error_correction_level(url.as_bytes(), qrcode::EcLevel::M)
        .context("encoding the QR code")?;
    let svg = svg
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if svg {
        let doc = qr
            .render::<qrcode::render::svg::Color>()
            .min_dimensions(256, 256)
            .build();
        std::fs::write(path, doc).with_context(|| format!("writing {}", path.display()))?;
    } else {
        qr.render::<image::Luma<u8>>()
            .min_dimensions(256, 256)
            .build()
            .save_with_format(path, image::ImageFormat::Png)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn info_text(i: &LinkInfoReply) -> String {
    let mut lines = vec![
        format!("code: {}", i.code),
        format!("short_url: {}", i.short_url),
        format!("target: {}", i.target),
    ];
    if !i.account.is_empty() {
        lines.push(format!("account: {}", show(&i.account)));
    }
    if let Some(u) = &i.ios {
        lines.push(format!("ios: {u}"));
    }
    if let Some(u) = &i.android {
        lines.push(format!("android: {u}"));
    }
    lines.push(format!("redirect: {}", if i.permanent { 301 } else { 302 }));
    lines.push(format!("alias: {}", if i.alias { "yes" } else { "no" }));
    lines.push(format!(
        "query_passthrough: {}",
        if i.drop_query { "off" } else { "on" }
    ));
    lines.push(format!("created: {}", calendar::timestamp(i.created_at)));
    lines.push(format!("expires: {}", out::when(i.expires_at)));
    lines.push(format!(
        "ttl: {}",
        if i.ttl_ms == 0 {
            "none".into()
        } else {
            format_duration(Duration::from_millis(i.ttl_ms))
        }
    ));
    lines.push(format!("visits: {}", i.visits));
    if i.last_visit > 0 {
        lines.push(format!("last_visit: {}", calendar::timestamp(i.last_visit)));
    }
    for (day, n) in &i.daily {
        lines.push(format!("day {} {n}", calendar::date(i64::from(*day))));
    }
    lines.join("\n")
}

fn info_json(i: &LinkInfoReply) -> serde_json::Value {
    json!({
        "code": i.code,
        "short_url": i.short_url,
        "target": i.target,
        "account": show(&i.account),
        "ios": i.ios,
        "android": i.android,
        "redirect": if i.permanent { 301 } else { 302 },
        "alias": i.alias,
        "query_passthrough": !i.drop_query,
        "created_at_ms": i.created_at,
        "created_at": out::time(i.created_at),
        "expires_at_ms": i.expires_at,
        "expires_at": out::time(i.expires_at),
        "ttl_ms": i.ttl_ms,
        "visits": i.visits,
        "last_visit_ms": i.last_visit,
        "last_visit": out::time(i.last_visit),
        "daily": i.daily.iter().map(|(day, n)| json!({
            "date": calendar::date(i64::from(*day)),
            "visits": n,
        })).collect::<Vec<_>>(),
    })
}
