//! `[cluster]`: where this node's map comes from and how it reaches its
//! peers. Nothing set: the node is alone and owns every slot (epoch 0).

use serde::Deserialize;
use std::path::PathBuf;

/// Keys (and value parts) per MIGRATE_IMPORT chunk at most.
pub const DEFAULT_MIGRATE_CHUNK_KEYS: usize = 4096;
/// Bytes per MIGRATE_IMPORT chunk at most: well under the default 4 MiB
/// frame, so a target with default limits takes every chunk.
pub const DEFAULT_MIGRATE_CHUNK_BYTES: usize = 1 << 20;
/// How long a node waits for a peer's answer during a migration.
pub const DEFAULT_PEER_TIMEOUT_MS: u64 = 10_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// The cluster map file (`epoch = N` and `[[nodes]]` with `id`, `addr`,
    /// `slots`). Optional; at start the node runs the newer (by epoch) of
    /// this file and the map it stored last.
    pub map_file: Option<PathBuf>,
    /// The `host:port` other nodes and clients reach this node at, as a lone
    /// node reports it in CLUSTER_SLOTS. Default: the listen address. In a
    /// cluster the map's address for this node is what counts.
    pub advertise: Option<String>,
    /// The `host:port` Redis clients reach this node's RESP listener at, as
    /// a lone node reports it (RESP's CLUSTER SLOTS, `-MOVED`). Default: the
    /// RESP listener's bound address. In a cluster the map's `resp_addr`
    /// for this node is what counts (not set there: `addr`'s port + 2).
    pub resp_advertise: Option<String>,
    /// PEM file of the CA that signed the peers' certificates: set it when
    /// the nodes serve TLS, so a migrating node reaches its peers over TLS.
    pub peer_ca_file: Option<PathBuf>,
    pub peer_timeout_ms: u64,
    pub migrate_chunk_keys: usize,
    pub migrate_chunk_bytes: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            map_file: None,
            advertise: None,
            resp_advertise: None,
            peer_ca_file: None,
            peer_timeout_ms: DEFAULT_PEER_TIMEOUT_MS,
            migrate_chunk_keys: DEFAULT_MIGRATE_CHUNK_KEYS,
            migrate_chunk_bytes: DEFAULT_MIGRATE_CHUNK_BYTES,
        }
    }
}

impl ClusterConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (name, a) in [
            ("advertise", &self.advertise),
            ("resp_advertise", &self.resp_advertise),
        ] {
            if let Some(a) = a {
                if a.rsplit_once(':')
                    .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
                {
                    return Err(format!("cluster.{name} {a:?} is not host:port"));
                }
            }
        }
        if self.migrate_chunk_keys == 0 || self.migrate_chunk_bytes < 1024 {
            return Err(
                "cluster.migrate_chunk_keys must be positive and cluster.migrate_chunk_bytes at least 1024"
                    .into(),
            );
        }
        if self.migrate_chunk_bytes > rush_protocol::limits::DEFAULT_MAX_FRAME / 2 {
            return Err(format!(
                "cluster.migrate_chunk_bytes must be at most {} (half the default frame limit)",
                rush_protocol::limits::DEFAULT_MAX_FRAME / 2
            ));
        }
        if self.peer_timeout_ms == 0 {
            return Err("cluster.peer_timeout_ms must be positive".into());
        }
        Ok(())
    }
}
