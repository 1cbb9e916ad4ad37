//! `rush shorten`, `rush resolve`, `rush link info|update|delete|qr`.

use anyhow::Context;
use bytes::Bytes;
use clap::{Args, Subcommand};
use rush_client::protocol::cmd::{AppLinkChange, LinkShorten, LinkUpdate};
use rush_client::{format_duration, parse_duration, Client};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum LinksCmd {
    /// Shorten a URL; prints the short URL.
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
    #[arg(long)]
    ttl: Option<String>,
    /// Code length, 5-8 (default: the server's).
    #[arg(long)]
    len: Option<u8>,
    /// A custom code instead of a generated one.
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
    /// Return the existing code for this URL and account, if any.
    #[arg(long)]
    reuse: bool,
    /// Redirect with 301 (permanent) instead of 302.
    #[arg(long)]
    permanent: bool,
}

#[derive(Subcommand, Debug)]
pub enum LinkCmd {
    /// Target, dates and visit statistics.
    Info { code: String },
    /// Change the target, TTL, app links or redirect kind.
    Update {
        code: String,
        /// New target URL.
        #[arg(long)]
        url: Option<String>,
        /// New TTL from now (e.g. 30d, or "none").
        #[arg(long)]
        ttl: Option<String>,
        #[arg(long, conflicts_with = "no_ios")]
        ios: Option<String>,
        /// Remove the iOS app link.
        #[arg(long)]
        no_ios: bool,
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
    },
    /// Delete a link.
    Delete { code: String },
    /// Write the QR code of the short URL (PNG, or SVG for *.svg / --svg).
    Qr {
        code: String,
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
        #[arg(long)]
        svg: bool,
    },
}

/// `none`/`never`/`0` → no expiry, else a duration.
fn ttl_ms(s: &str) -> anyhow::Result<u64> {
    match s {
        "none" | "never" | "0" => Ok(0),
        s => Ok(parse_duration(s).map_err(anyhow::Error::msg)?.as_millis() as u64),
    }
}

fn app_change(set: Option<String>, clear: bool) -> AppLinkChange {
    match (set, clear) {
        (Some(u), _) => AppLinkChange::Set(u),
        (None, true) => AppLinkChange::Clear,
        (None, false) => AppLinkChange::Keep,
    }
}

pub async fn run(c: &Client, cmd: LinksCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        LinksCmd::Shorten(a) => {
            let reply = c
                .shorten_with(LinkShorten {
                    url: a.url,
                    account: Bytes::from(a.account),
                    length: a.len.unwrap_or(0),
                    ttl_ms: a.ttl.as_deref().map(ttl_ms).transpose()?,
                    alias: a.alias,
                    ios: a.ios,
                    android: a.android,
                    reuse: a.reuse,
                    permanent: a.permanent,
                })
                .await?;
            println!("{}", reply.short_url);
        }
        LinksCmd::Resolve { code } => println!("{}", c.resolve(code).await?.target),
        LinksCmd::Link(LinkCmd::Info { code }) => {
            let i = c.link_info(code).await?;
            println!("code: {}", i.code);
            println!("short_url: {}", i.short_url);
            println!("target: {}", i.target);
            if !i.account.is_empty() {
                println!("account: {}", String::from_utf8_lossy(&i.account));
            }
            if let Some(u) = &i.ios {
                println!("ios: {u}");
            }
            if let Some(u) = &i.android {
                println!("android: {u}");
            }
            println!("redirect: {}", if i.permanent { 301 } else { 302 });
            println!("alias: {}", if i.alias { "yes" } else { "no" });
            println!("created: {}", timestamp(i.created_at));
            println!(
                "expires: {}",
                if i.expires_at == 0 {
                    "never".into()
                } else {
                    timestamp(i.expires_at)
                }
            );
            println!(
                "ttl: {}",
                if i.ttl_ms == 0 {
                    "none".into()
                } else {
                    format_duration(Duration::from_millis(i.ttl_ms))
                }
            );
            println!("visits: {}", i.visits);
            if i.last_visit > 0 {
                println!("last_visit: {}", timestamp(i.last_visit));
            }
            for (day, n) in &i.daily {
                println!("day {} {n}", rush_client::calendar::date(i64::from(*day)));
            }
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
        }) => {
            let expires = c
                .link_update(LinkUpdate {
                    code,
                    url,
                    ttl_ms: ttl.as_deref().map(ttl_ms).transpose()?,
                    ios: app_change(ios, no_ios),
                    android: app_change(android, no_android),
                    permanent: match (permanent, temporary) {
                        (true, _) => Some(true),
                        (_, true) => Some(false),
                        _ => None,
                    },
                })
                .await?;
            println!(
                "OK expires {}",
                if expires == 0 {
                    "never".into()
                } else {
                    timestamp(expires)
                }
            );
        }
        LinksCmd::Link(LinkCmd::Delete { code }) => {
            println!(
                "{}",
                if c.link_delete(code).await? {
                    "deleted"
                } else {
                    "(not found)"
                }
            );
        }
        LinksCmd::Link(LinkCmd::Qr { code, out, svg }) => {
            let url = c.link_info(code).await?.short_url;
            let qr =
                qrcode::QrCode::with_error_correction_level(url.as_bytes(), qrcode::EcLevel::M)
                    .context("encoding the QR code")?;
            let svg = svg
                || out
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
            if svg {
                let doc = qr
                    .render::<qrcode::render::svg::Color>()
                    .min_dimensions(256, 256)
                    .build();
                std::fs::write(&out, doc).with_context(|| format!("writing {}", out.display()))?;
            } else {
                qr.render::<image::Luma<u8>>()
                    .min_dimensions(256, 256)
                    .build()
                    .save_with_format(&out, image::ImageFormat::Png)
                    .with_context(|| format!("writing {}", out.display()))?;
            }
            println!("{} -> {}", url, out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `YYYY-MM-DD HH:MM:SS UTC` of unix ms.
fn timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let (d, s) = ((secs / 86_400) as i64, secs % 86_400);
    format!(
        "{} {:02}:{:02}:{:02} UTC",
        rush_client::calendar::date(d),
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(rush_client::calendar::date(0), "1970-01-01");
        assert_eq!(rush_client::calendar::date(19_723), "2024-01-01");
        assert_eq!(
            super::timestamp(951_782_400_000 + 3_723_000),
            "2000-02-29 01:02:03 UTC"
        );
    }
}
