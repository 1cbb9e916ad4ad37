//! `rush cluster …`: create a cluster, show and apply maps, move slots.

use crate::exit;
use crate::out::Out;
use clap::Subcommand;
use rush_client::cluster::MigrateProgress;
use rush_client::protocol::cmd::cluster::{file, parse_slot_specs};
use rush_client::protocol::cmd::{ClusterSlotsReply, SlotRange};
use rush_client::{format_remaining, Client, ClientOptions};
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Slot ranges per node ("START-END ADDR ID" lines, or the map file
    /// format with --toml).
    Slots {
        /// Print the map as a map file (for `rush cluster apply`).
        #[arg(long, conflicts_with = "json")]
        toml: bool,
    },
    /// One line per node: id, address, slot count, ranges.
    Nodes,
    /// Make a cluster of these nodes: 16384 slots shared evenly, in order.
    Create {
        /// The nodes' addresses (HOST:PORT, or HOST for port 7379).
        #[arg(required = true, value_parser = crate::args::addr)]
        addrs: Vec<String>,
        /// Replace the map the nodes already run (slots are reassigned,
        /// their data is not moved).
        #[arg(long)]
        replace: bool,
    },
    /// Send a map file (epoch, [[nodes]] with id, addr, slots) to every node
    /// it names.
    Apply {
        /// The map file (TOML, as `rush cluster slots --toml` prints).
        file: PathBuf,
    },
    /// Make the replica with this id the primary of its primary's slots
    /// (the primary is lost, or is to be replaced): it is promoted, and a
    /// map of the next epoch, where the old primary is its replica, is sent
    /// to every node. Nodes that are down are listed: apply the map to them
    /// when they are back (`rush cluster slots --toml`, `rush cluster
    /// apply`).
    Failover {
        /// The replica's node id (see `rush cluster nodes`).
        replica: String,
        /// Seconds to wait for the promoted node to serve again.
        #[arg(long, default_value_t = 30, value_name = "SECONDS")]
        wait: u64,
    },
    /// Move slots (e.g. "100-199" or "5,9-12") to the node with this id,
    /// live. Each slot's owner does the move; progress is shown on a
    /// terminal.
    Migrate {
        /// Slots and slot ranges, comma-separated.
        #[arg(value_parser = slots)]
        slots: SlotSpec,
        /// The id of the node to move them to (see `rush cluster nodes`).
        #[arg(long)]
        to: String,
        /// Seconds to wait for the whole move.
        #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
        wait: u64,
    },
}

/// Slot ranges from the command line (a newtype: clap would take a `Vec`
/// for several arguments).
#[derive(Debug, Clone)]
pub struct SlotSpec(Vec<SlotRange>);

fn slots(s: &str) -> Result<SlotSpec, String> {
    let ranges = parse_slot_specs(s)?;
    if ranges.is_empty() {
        return Err("name the slots to move, e.g. 100-199".into());
    }
    Ok(SlotSpec(ranges))
}

fn slots_text(map: &ClusterSlotsReply) -> String {
    let mut text = format!("epoch {}", map.epoch);
    for n in &map.normalized().nodes {
        for r in &n.ranges {
            text.push_str(&format!("\n{}-{} {} {}", r.start, r.end, n.addr, n.id));
        }
    }
    text
}

fn map_json(map: &ClusterSlotsReply) -> Value {
    json!({
        "epoch": map.epoch,
        "nodes": map.normalized().nodes.iter().map(|n| json!({
            "id": n.id,
            "addr": n.addr,
            "slots": n.ranges.iter().map(|r| (r.end - r.start) as u32 + 1).sum::<u32>(),
            "ranges": n.ranges.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "replica_of": n.replica_of,
        })).collect::<Vec<_>>(),
    })
}

pub async fn run(
    addr: &str,
    opts: ClientOptions,
    cmd: ClusterCmd,
    out: Out,
) -> anyhow::Result<ExitCode> {
    match cmd {
        ClusterCmd::Create { addrs, replace } => {
            let map = rush_client::cluster::create(&addrs, replace, opts).await?;
            out.print(
                || {
                    format!(
                        "cluster created: {} nodes, epoch {}\n{}",
                        map.nodes.len(),
                        map.epoch,
                        slots_text(&map)
                    )
                },
                || map_json(&map),
            )?;
        }
        ClusterCmd::Slots { toml } => {
            let c = Client::connect_with(addr, opts).await?;
            let map = c.cluster_slots().await?;
            if toml {
                print!("{}", file::to_toml(&map));
            } else {
                out.print(|| slots_text(&map), || map_json(&map))?;
            }
        }
        ClusterCmd::Nodes => {
            let c = Client::connect_with(addr, opts).await?;
            let map = c.cluster_slots().await?;
            out.print(
                || {
                    let mut text = format!("epoch {}", map.epoch);
                    for n in &map.normalized().nodes {
                        let count: u32 =
                            n.ranges.iter().map(|r| (r.end - r.start) as u32 + 1).sum();
                        let ranges: Vec<String> = n.ranges.iter().map(|r| r.to_string()).collect();
                        match &n.replica_of {
                            Some(p) => {
                                text.push_str(&format!("\n{} {} replica_of={p}", n.id, n.addr))
                            }
                            None => text.push_str(&format!(
                                "\n{} {} slots={} {}",
                                n.id,
                                n.addr,
                                count,
                                ranges.join(",")
                            )),
                        }
                    }
                    text
                },
                || map_json(&map),
            )?;
        }
        ClusterCmd::Apply { file: path } => {
            let map = file::load_map(&path).map_err(anyhow::Error::msg)?;
            let first = map.nodes[0].addr.clone();
            let c = Client::connect_with(&first, opts).await?;
            let results = c.cluster_apply(&map).await;
            let failed = results.iter().filter(|(_, r)| r.is_err()).count();
            if out.json {
                out.json(json!(results
                    .iter()
                    .map(|(node, r)| match r {
                        Ok(epoch) => json!({ "node": node, "epoch": epoch }),
                        Err(e) => json!({ "node": node, "error": e.to_string() }),
                    })
                    .collect::<Vec<_>>()))?;
            } else {
                for (node, r) in &results {
                    match r {
                        Ok(epoch) => println!("{node}: epoch {epoch}"),
                        Err(e) => println!("{node}: {e}"),
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{failed} of {} nodes did not take the map", map.nodes.len());
            }
        }
        ClusterCmd::Failover { replica, wait } => {
            let c = Client::connect_with(addr, opts).await?;
            let f = c
                .cluster_failover(&replica, Duration::from_secs(wait))
                .await?;
            let missed: Vec<&str> = f
                .nodes
                .iter()
                .filter(|(_, r)| r.is_err())
                .map(|(n, _)| n.as_str())
                .collect();
            out.print(
                || {
                    let mut text = format!(
                        "{replica} {} the primary; epoch {}",
                        if f.promoted { "is now" } else { "was already" },
                        f.map.epoch
                    );
                    for (node, r) in &f.nodes {
                        match r {
                            Ok(_) => text.push_str(&format!("\n{node}: took the map")),
                            Err(e) => text.push_str(&format!("\n{node}: {e}")),
                        }
                    }
                    text
                },
                || {
                    json!({
                        "replica": replica,
                        "promoted": f.promoted,
                        "epoch": f.map.epoch,
                        "nodes": f.nodes.iter().map(|(node, r)| match r {
                            Ok(epoch) => json!({ "node": node, "epoch": epoch }),
                            Err(e) => json!({ "node": node, "error": e.to_string() }),
                        }).collect::<Vec<_>>(),
                    })
                },
            )?;
            if !missed.is_empty() {
                eprintln!(
                    "warning: these nodes did not take the map (apply it when they are back; a \
                     lost primary rejoins as a replica with --replica-of): {}",
                    missed.join(" ")
                );
            }
        }
        ClusterCmd::Migrate { slots, to, wait } => {
            let wait = Duration::from_secs(wait);
            let opts = ClientOptions {
                request_timeout: wait,
                ..opts
            };
            let c = Client::connect_with(addr, opts).await?;
            let mut progress = Progress::new(std::io::stderr().is_terminal());
            let moved = tokio::time::timeout(
                wait,
                c.cluster_migrate_with(&slots.0, &to, |p| progress.show(p)),
            )
            .await;
            progress.finish();
            let r = match moved {
                Ok(r) => r?,
                Err(_) => anyhow::bail!(
                    "gave up waiting after {} (--wait); the node finishes the step it was on \
                     (see `rush cluster slots` for where the slots are)",
                    format_remaining(wait)
                ),
            };
            out.print(
                || {
                    format!(
                        "moved {} slots to {to}: {} keys, {} bytes; epoch {}",
                        r.slots, r.keys, r.bytes, r.epoch
                    )
                },
                || {
                    json!({
                        "slots": r.slots,
                        "to": to,
                        "keys": r.keys,
                        "bytes": r.bytes,
                        "epoch": r.epoch,
                        "unsynced": r.unsynced,
                    })
                },
            )?;
            if !r.unsynced.is_empty() {
                eprintln!(
                    "warning: these nodes did not take the new map (apply it to them): {}",
                    r.unsynced.join(" ")
                );
            }
        }
    }
    Ok(exit::code(exit::OK))
}

/// The progress line of a move, redrawn in place on a terminal (stderr);
/// nothing elsewhere (the final line on stdout says what moved).
struct Progress {
    tty: bool,
    started: Instant,
    drawn: bool,
}

impl Progress {
    fn new(tty: bool) -> Progress {
        Progress {
            tty,
            started: Instant::now(),
            drawn: false,
        }
    }

    fn show(&mut self, p: &MigrateProgress) {
        if !self.tty {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{}", progress_line(p, self.started.elapsed()));
        let _ = err.flush();
        self.drawn = true;
    }

    fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

/// `moving slots: 37/100 (37%), 12345 keys, 4.5 MiB, 12s`
fn progress_line(p: &MigrateProgress, elapsed: Duration) -> String {
    let percent = (u64::from(p.slots_moved) * 100)
        .checked_div(u64::from(p.slots_total))
        .unwrap_or(100);
    format!(
        "moving slots: {}/{} ({percent}%), {} keys, {}, {}",
        p.slots_moved,
        p.slots_total,
        p.keys,
        bytes(p.bytes),
        match elapsed.as_secs() {
            0 => "0s".to_string(),
            secs => format_remaining(Duration::from_secs(secs)),
        }
    )
}

/// A byte count for people: `812 B`, `4.5 MiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines() {
        let p = MigrateProgress {
            slots_total: 100,
            slots_moved: 37,
            keys: 12_345,
            bytes: 4_718_592,
            epoch: 40,
        };
        assert_eq!(
            progress_line(&p, Duration::from_millis(12_400)),
            "moving slots: 37/100 (37%), 12345 keys, 4.5 MiB, 12s"
        );
        let none = MigrateProgress {
            slots_total: 0,
            slots_moved: 0,
            ..p
        };
        assert!(progress_line(&none, Duration::ZERO).starts_with("moving slots: 0/0 (100%)"));
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(u64::MAX), "16384.0 PiB");
    }
}
