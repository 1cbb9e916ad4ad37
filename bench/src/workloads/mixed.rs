//! `mixed`: the four services at once, as a sale-day spike looks to one
//! backend. Each operation is, at random:
//!
//! | share | operation | why this much |
//! |------:|-----------|---------------|
//! | 50 % | `links-resolve` (Zipf) | shared links are clicked far more often than anything else is done |
//! | 25 % | `catalog` (uniform, 40 % absent) | merchant / risk checks on the way to checkout |
//! | 10 % | `limits` order | checkouts of limited items |
//! | 10 % | `envelopes` grab | a campaign's envelope rain |
//! | 5 % | `links-shorten` | users sharing products |
//!
//! Each part is exactly the workload of that name, on both sides (same
//! preloaded links and owners — loaded only if missing — same policy, same
//! scripts, envelopes made for this run).

use crate::dist::Dist;
use crate::stats::{OpError, Outcome};
use crate::workload::{Params, RedisConn, RushConn, Workload};
use crate::workloads::{catalog, envelopes, limits, links_resolve, links_shorten};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// Cumulative percentages: resolve, catalog query, order, grab, shorten.
const RESOLVE: u32 = 50;
const QUERY: u32 = RESOLVE + 25;
const ORDER: u32 = QUERY + 10;
const GRAB: u32 = ORDER + 10;

pub struct Mixed {
    resolve: links_resolve::LinksResolve,
    catalog: catalog::Catalog,
    limits: limits::Limits,
    envelopes: envelopes::Envelopes,
    shorten: links_shorten::LinksShorten,
}

pub struct Lane {
    rng: SmallRng,
    resolve: links_resolve::Lane,
    catalog: catalog::Lane,
    limits: limits::Lane,
    envelopes: envelopes::Lane,
    shorten: links_shorten::Lane,
}

/// `params` with the part's own distribution (`--dist` is not applied to
/// the parts: each keeps the popularity its workload has).
fn part<W: Workload>(params: &Params) -> Params {
    let mut p = params.clone();
    p.dist = Some(W::DIST);
    p
}

impl Workload for Mixed {
    const NAME: &'static str = "mixed";
    const ABOUT: &'static str = "All services at once: 50% links-resolve, 25% catalog, 10% limits \
         orders, 10% envelope grabs, 5% links-shorten (each exactly as in its own workload)";
    const READS_PRELOADED: bool = true;
    const DIST: Dist = Dist::Uniform;
    const RUSH_METRICS: &'static [&'static str] = catalog::METRICS;
    type Lane = Lane;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(Mixed {
            resolve: links_resolve::LinksResolve::new(&part::<links_resolve::LinksResolve>(
                params,
            ))?,
            catalog: catalog::Catalog::new(&part::<catalog::Catalog>(params))?,
            limits: limits::Limits::new(&part::<limits::Limits>(params))?,
            envelopes: envelopes::Envelopes::new(&part::<envelopes::Envelopes>(params))?,
            shorten: links_shorten::LinksShorten::new(&part::<links_shorten::LinksShorten>(
                params,
            ))?,
        })
    }

    fn lane(&self, index: u64) -> Lane {
        Lane {
            rng: SmallRng::seed_from_u64(0x313e_d000 ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            resolve: self.resolve.lane(index),
            catalog: self.catalog.lane(index),
            limits: self.limits.lane(index),
            envelopes: self.envelopes.lane(index),
            shorten: self.shorten.lane(index),
        }
    }

    async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        Ok(self.resolve.preload_rush(conns).await? + self.catalog.preload_rush(conns).await?)
    }

    async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        Ok(self.resolve.preload_redis(conns).await? + self.catalog.preload_redis(conns).await?)
    }

    async fn setup_rush(&self, conns: &[RushConn]) -> anyhow::Result<()> {
        self.resolve.setup_rush(conns).await?;
        self.limits.setup_rush(conns).await?;
        self.envelopes.setup_rush(conns).await
    }

    async fn setup_redis(&self, conns: &[RedisConn]) -> anyhow::Result<()> {
        self.resolve.setup_redis(conns).await?;
        self.limits.setup_redis(conns).await?;
        self.envelopes.setup_redis(conns).await
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        match lane.rng.random_range(0..100u32) {
            x if x < RESOLVE => self.resolve.rush(&mut lane.resolve, conn).await,
            x if x < QUERY => self.catalog.rush(&mut lane.catalog, conn).await,
            x if x < ORDER => self.limits.rush(&mut lane.limits, conn).await,
            x if x < GRAB => self.envelopes.rush(&mut lane.envelopes, conn).await,
            _ => self.shorten.rush(&mut lane.shorten, conn).await,
        }
    }

    async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        match lane.rng.random_range(0..100u32) {
            x if x < RESOLVE => self.resolve.redis(&mut lane.resolve, conn).await,
            x if x < QUERY => self.catalog.redis(&mut lane.catalog, conn).await,
            x if x < ORDER => self.limits.redis(&mut lane.limits, conn).await,
            x if x < GRAB => self.envelopes.redis(&mut lane.envelopes, conn).await,
            _ => self.shorten.redis(&mut lane.shorten, conn).await,
        }
    }
}
