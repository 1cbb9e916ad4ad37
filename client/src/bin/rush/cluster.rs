//! `rush cluster …`: create a cluster, show and apply maps, move slots.

use clap::Subcommand;
use rush_client::protocol::cmd::cluster::{file, parse_slot_specs};
use rush_client::protocol::cmd::ClusterSlotsReply;
use rush_client::{Client, ClientOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Slot ranges per node ("START-END ADDR ID" lines, or the map file
    /// format with --toml).
    Slots {
        #[arg(long)]
        toml: bool,
    },
    /// One line per node: id, address, slot count, ranges.
    Nodes,
    /// Make a cluster of these nodes: 16384 slots shared evenly, in order.
    Create {
        #[arg(required = true)]
        addrs: Vec<String>,
        /// Replace the map the nodes already run (slots are reassigned,
        /// their data is not moved).
        #[arg(long)]
        replace: bool,
    },
    /// Send a map file (epoch, [[nodes]] with id, addr, slots) to every node
    /// it names.
    Apply { file: PathBuf },
    /// Move slots (e.g. "100-199" or "5,9-12") to the node with this id,
    /// live. Each slot's owner does the move.
    Migrate {
        slots: String,
        #[arg(long)]
        to: String,
        /// Seconds to wait for the whole move.
        #[arg(long, default_value_t = 3600)]
        wait: u64,
    },
}

fn print_slots(map: &ClusterSlotsReply) {
    println!("epoch {}", map.epoch);
    for n in &map.normalized().nodes {
        for r in &n.ranges {
            println!("{}-{} {} {}", r.start, r.end, n.addr, n.id);
        }
    }
}

pub async fn run(addr: &str, opts: ClientOptions, cmd: ClusterCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        ClusterCmd::Create { addrs, replace } => {
            let map = rush_client::cluster::create(&addrs, replace, opts).await?;
            println!(
                "cluster created: {} nodes, epoch {}",
                map.nodes.len(),
                map.epoch
            );
            print_slots(&map);
        }
        ClusterCmd::Slots { toml } => {
            let c = Client::connect_with(addr, opts).await?;
            let map = c.cluster_slots().await?;
            if toml {
                print!("{}", file::to_toml(&map));
            } else {
                print_slots(&map);
            }
        }
        ClusterCmd::Nodes => {
            let c = Client::connect_with(addr, opts).await?;
            let map = c.cluster_slots().await?;
            println!("epoch {}", map.epoch);
            for n in &map.normalized().nodes {
                let count: u32 = n.ranges.iter().map(|r| (r.end - r.start) as u32 + 1).sum();
                let ranges: Vec<String> = n.ranges.iter().map(|r| r.to_string()).collect();
                println!("{} {} slots={} {}", n.id, n.addr, count, ranges.join(","));
            }
        }
        ClusterCmd::Apply { file: path } => {
            let map = file::load_map(&path).map_err(anyhow::Error::msg)?;
            let first = map.nodes[0].addr.clone();
            let c = Client::connect_with(&first, opts).await?;
            let mut failed = 0;
            for (node, r) in c.cluster_apply(&map).await {
                match r {
                    Ok(epoch) => println!("{node}: epoch {epoch}"),
                    Err(e) => {
                        failed += 1;
                        println!("{node}: {e}");
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{failed} of {} nodes did not take the map", map.nodes.len());
            }
        }
        ClusterCmd::Migrate { slots, to, wait } => {
            let ranges = parse_slot_specs(&slots).map_err(anyhow::Error::msg)?;
            if ranges.is_empty() {
                anyhow::bail!("name the slots to move, e.g. 100-199");
            }
            let opts = ClientOptions {
                request_timeout: Duration::from_secs(wait),
                ..opts
            };
            let c = Client::connect_with(addr, opts).await?;
            let r = c.cluster_migrate(&ranges, &to).await?;
            println!(
                "moved {} slots to {to}: {} keys, {} bytes; epoch {}",
                r.slots, r.keys, r.bytes, r.epoch
            );
            if !r.unsynced.is_empty() {
                eprintln!(
                    "warning: these nodes did not take the new map (apply it to them): {}",
                    r.unsynced.join(" ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
