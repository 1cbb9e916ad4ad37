//! `catalog` and `catalog-zipf`: a merchant's records by owner key, 40% of
//! queries for owners that don't exist (typos, scans, fraud probes), over
//! `--keys` owners (1M in the full suite) holding 3–5 records each (~40
//! bytes of attributes a record). Owners are drawn uniformly (`catalog`) or
//! Zipf(0.99) (`catalog-zipf`); absent owners uniformly from a range no
//! preload writes. Until the service had one name they were `lookups` and
//! `lookups-zipf`, which still find them (see [`Workload::ALIASES`]).
//!
//! Rush: CATALOG_QUERY owner (no filter) — Bloom filter, hot cache, then
//! storage. The run reads rushd's `/metrics` before and after, so the report
//! shows storage reads per query next to the throughput (the goal: at most
//! 0.6 + the Bloom false-positive rate).
//!
//! Redis: HGETALL owner, each record a field (`r0` → `plan=gold;…`). No
//! client-side Bloom filter: Redis is asked about absent owners too (a
//! shared filter would need RedisBloom, and a per-client one can't see other
//! clients' writes).
//!
//! Preload: Rush CATALOG_PUT per record, pipelined (group commit makes them
//! a few large synced writes); Redis one HSET per owner, pipelined. A marker
//! key (`bench:catalog:owners`) records how many owners are loaded, so a
//! later run — `catalog-zipf`, `mixed`, a bigger `--keys` — adds only what
//! is missing.

use crate::dist::Dist;
use crate::stats::{OpError, Outcome};
use crate::workload::{
    first_conn, format_key, redis_bulk_range, rush_bulk, KeyPicker, Marker, Params, RedisConn,
    RushConn, Workload,
};
use bytes::Bytes;
use rand::RngExt;
use rush_protocol::cmd::{CatalogFilter, CatalogPut, CatalogQuery, Record};

const PREFIX: &[u8] = b"owner:";
/// Absent owners are drawn from `ABSENT_BASE..ABSENT_BASE + keys`, which no
/// preload writes (still 12 digits: the same key length as present ones).
const ABSENT_BASE: u64 = 900_000_000_000;
/// Share of queries for absent owners, in percent.
pub const ABSENT_PERCENT: u32 = 40;
/// How many owners (`0..n`) are loaded.
const MARKER: Marker = Marker("bench:catalog:owners");

const PLANS: [&str; 3] = ["gold", "silver", "bronze"];
const REGIONS: [&str; 4] = ["east", "west", "north", "south"];

/// Series of rushd the run reports (storage reads per query, answer paths,
/// measured false-positive rate).
pub const METRICS: &[&str] = &[
    "rush_storage_reads_total",
    "rush_catalog_answers_total",
    "rush_catalog_bloom_false_positive_rate",
];

/// Records of owner `n`: 3, 4 or 5.
pub fn records_of(n: u64) -> u64 {
    3 + n % 3
}

/// Index of owner `o`'s first record in the preload's record order
/// (owners 3k, 3k+1, 3k+2 hold 3, 4, 5 records: 12 per 3 owners).
fn first_record(o: u64) -> u64 {
    (o / 3) * 12 + [0, 3, 7][(o % 3) as usize]
}

/// (owner, record number) of record index `i`.
fn record_at(i: u64) -> (u64, u64) {
    let (block, r) = (i / 12, i % 12);
    match r {
        0..=2 => (block * 3, r),
        3..=6 => (block * 3 + 1, r - 3),
        _ => (block * 3 + 2, r - 7),
    }
}

fn attributes(owner: u64, j: u64) -> [(&'static str, &'static str); 3] {
    [
        ("plan", PLANS[((owner + j) % 3) as usize]),
        ("region", REGIONS[((owner * 7 + j) % 4) as usize]),
        ("status", "active"),
    ]
}

fn record(owner: u64, j: u64) -> Record {
    let mut r = Record::new(format!("r{j}"));
    for (k, v) in attributes(owner, j) {
        r = r.attr(k, v);
    }
    r
}

/// The Redis field value of a record: its attributes, `k=v;k=v`.
fn redis_value(owner: u64, j: u64) -> String {
    let a = attributes(owner, j);
    format!(
        "{}={};{}={};{}={}",
        a[0].0, a[0].1, a[1].0, a[1].1, a[2].0, a[2].1
    )
}

/// What both catalog workloads share.
pub struct Core {
    params: Params,
}

pub struct Lane {
    keys: KeyPicker,
}

/// One query: the owner key and how many records it must answer (0: absent).
fn pick(lane: &mut Lane, keys: u64) -> u64 {
    let absent = lane.keys.rng.random_range(0..100u32) < ABSENT_PERCENT;
    let n = if absent {
        ABSENT_BASE + lane.keys.rng.random_range(0..keys)
    } else {
        lane.keys.sampler.sample(&mut lane.keys.rng)
    };
    format_key(&mut lane.keys.buf, PREFIX, n);
    if absent {
        0
    } else {
        records_of(n)
    }
}

fn check(found: u64, want: u64) -> Result<Outcome, OpError> {
    match (found, want) {
        (0, 0) => Ok(Outcome::Miss),
        (f, w) if f == w => Ok(Outcome::Done),
        (0, _) => Err(OpError::new(
            "MISSING",
            "a preloaded owner answered no records",
        )),
        (f, w) => Err(OpError::new(
            "WRONG_VALUE",
            format!("{f} records answered, {w} loaded"),
        )),
    }
}

impl Core {
    pub fn new(params: &Params) -> Core {
        Core {
            params: params.clone(),
        }
    }

    pub fn lane(&self, index: u64) -> Lane {
        Lane {
            keys: KeyPicker::new(&self.params, index),
        }
    }

    pub async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        let c = first_conn(conns)?;
        let have = MARKER.rush(c).await?;
        let to = self.params.keys;
        if have >= to {
            return Ok(0);
        }
        let from = first_record(have);
        rush_bulk(conns, first_record(to) - from, |i| {
            let (owner, j) = record_at(from + i);
            let mut key = Vec::with_capacity(PREFIX.len() + 12);
            format_key(&mut key, PREFIX, owner);
            CatalogPut {
                owner: Bytes::from(key),
                record: record(owner, j),
            }
        })
        .await?;
        MARKER.set_rush(c, to).await?;
        Ok(to - have)
    }

    pub async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        let mut c = first_conn(conns)?.clone();
        let have = MARKER.redis(&mut c).await?;
        let to = self.params.keys;
        if have >= to {
            return Ok(0);
        }
        redis_bulk_range(conns, have, to, |owner, pipe| {
            let mut key = Vec::with_capacity(PREFIX.len() + 12);
            format_key(&mut key, PREFIX, owner);
            let cmd = pipe.cmd("HSET").arg(key);
            for j in 0..records_of(owner) {
                cmd.arg(format!("r{j}")).arg(redis_value(owner, j));
            }
            cmd.ignore();
        })
        .await?;
        MARKER.set_redis(&mut c, to).await?;
        Ok(to - have)
    }

    pub async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        let want = pick(lane, self.params.keys);
        let reply = conn
            .call(&CatalogQuery {
                owner: Bytes::copy_from_slice(&lane.keys.buf),
                filter: CatalogFilter::default(),
            })
            .await?;
        check(reply.records.len() as u64, want)
    }

    pub async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        let want = pick(lane, self.params.keys);
        let v: redis::Value = redis::cmd("HGETALL")
            .arg(&lane.keys.buf[..])
            .query_async(conn)
            .await?;
        let fields = match v {
            redis::Value::Array(a) => a.len() as u64 / 2,
            redis::Value::Map(m) => m.len() as u64,
            other => {
                return Err(OpError::new(
                    "WRONG_VALUE",
                    format!("HGETALL answered {other:?}"),
                ))
            }
        };
        check(fields, want)
    }
}

/// True for the workloads of this file: their runs' `/metrics` show the
/// catalog's storage reads per query.
pub fn is_catalog(workload: &str) -> bool {
    workload == Catalog::NAME || workload == CatalogZipf::NAME
}

macro_rules! catalog_workload {
    ($ty:ident, $name:literal, $alias:literal, $about:literal, $dist:expr) => {
        pub struct $ty(Core);

        impl Workload for $ty {
            const NAME: &'static str = $name;
            const ABOUT: &'static str = $about;
            const ALIASES: &'static [&'static str] = &[$alias];
            const READS_PRELOADED: bool = true;
            const DIST: Dist = $dist;
            const RUSH_METRICS: &'static [&'static str] = METRICS;
            type Lane = Lane;

            fn new(params: &Params) -> anyhow::Result<Self> {
                Ok($ty(Core::new(params)))
            }

            fn lane(&self, index: u64) -> Lane {
                self.0.lane(index)
            }

            async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
                self.0.preload_rush(conns).await
            }

            async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
                self.0.preload_redis(conns).await
            }

            async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
                self.0.rush(lane, conn).await
            }

            async fn redis(
                &self,
                lane: &mut Lane,
                conn: &mut RedisConn,
            ) -> Result<Outcome, OpError> {
                self.0.redis(lane, conn).await
            }
        }
    };
}

catalog_workload!(
    Catalog,
    "catalog",
    "lookups",
    "An owner's records (3-5 each), owners uniform, 40% of queries for absent owners; \
     Rush CATALOG_QUERY (Bloom filter, hot cache, storage), Redis HGETALL (asked about \
     absent owners too)",
    Dist::Uniform
);

catalog_workload!(
    CatalogZipf,
    "catalog-zipf",
    "lookups-zipf",
    "The same catalog queries with Zipf(0.99) owner popularity (absent owners still 40%, uniform)",
    Dist::Zipf(0.99)
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_indexes_cover_owners_in_order() {
        let mut i = 0;
        for o in 0..30 {
            assert_eq!(first_record(o), i);
            for j in 0..records_of(o) {
                assert_eq!(record_at(i), (o, j));
                i += 1;
            }
        }
        assert_eq!(first_record(30), i);
    }

    #[test]
    fn redis_values_carry_the_same_attributes() {
        let r = record(4, 1);
        assert_eq!(r.attributes.len(), 3);
        let v = redis_value(4, 1);
        for (k, val) in &r.attributes {
            let pair = format!(
                "{}={}",
                std::str::from_utf8(k).unwrap(),
                std::str::from_utf8(val).unwrap()
            );
            assert!(v.contains(&pair), "{v} lacks {pair}");
        }
    }
}
