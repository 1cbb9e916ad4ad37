//! The suite's phases, in the order [`run_suite`](super::run_suite) runs
//! them: every workload on every server, redis-benchmark on every server,
//! scaling and footprint (links, then owners, each on its own server), one
//! shard, and the pinned layout.

use super::pin::{affinity, Pin};
use super::results::items_of;
use super::servers::Server;
use super::{
    base_options, calibrate, probes, redis_benchmark, Footprint, Pinning, ServerKind, Suite,
    PINNED_CLIENT_THREADS, VARIANT_ONE_SHARD, VARIANT_PINNED, VARIANT_SCALING,
};
use crate::driver::Stop;
use crate::target::Side;
use crate::workload::Entry;
use anyhow::Context;

/// One family of phase 2, run on a fresh server of its own.
#[derive(Debug, Clone, Copy)]
pub struct ScalingFamily {
    /// The workload whose preload grows the data to each size; the
    /// footprint is measured after it.
    pub grows: &'static str,
    /// The workload run next at that size, on the same data.
    pub then: &'static str,
    /// `then` stores an item per answered operation (links-shorten's new
    /// links): later footprints of the family count them.
    pub then_stores: bool,
}

/// Phase 2's families: links (links-resolve, then links-shorten writing new
/// links into the store), owners (catalog, then catalog-zipf, whose
/// preload finds catalog's marker and adds nothing) and users (limits-held,
/// orders reading stored books, then limits, fresh users' books written
/// into the large store) and envelopes (envelopes-held, grabs of stored
/// envelopes, then the envelopes storm, its envelopes created in the large
/// store).
pub const SCALING_FAMILIES: [ScalingFamily; 4] = [
    ScalingFamily {
        grows: "links-resolve",
        then: "links-shorten",
        then_stores: true,
    },
    ScalingFamily {
        grows: "catalog",
        then: "catalog-zipf",
        then_stores: false,
    },
    ScalingFamily {
        grows: "limits-held",
        then: "limits",
        then_stores: false,
    },
    ScalingFamily {
        grows: "envelopes-held",
        then: "envelopes",
        then_stores: false,
    },
];

impl Suite<'_> {
    /// Phase 1: every workload against `kind`.
    pub(super) fn every_workload(
        &mut self,
        kind: ServerKind,
        entries: &[&Entry],
    ) -> anyhow::Result<()> {
        let server = self.start(kind, self.opts.shards, None)?;
        let opts = self.opts;
        for entry in entries {
            let mut loaded = false;
            let mut peak: Option<f64> = None;
            for &pipeline in &opts.pipelines {
                let mut o = base_options(opts, kind, &server, entry, pipeline);
                o.load &= !loaded;
                eprintln!(
                    "-- {} · {} · {} in flight per connection",
                    entry.name,
                    kind.key(),
                    pipeline
                );
                if let Some(r) = self.run(entry, o, kind, None, None) {
                    loaded |= entry.reads_preloaded;
                    if pipeline == self.top {
                        peak = Some(r.throughput);
                    }
                }
            }
            let Some(peak) = peak else { continue };
            let steps: &[f64] = if entry.sweep {
                &opts.sweep
            } else if opts.half_peak {
                &[0.5]
            } else {
                &[]
            };
            for &f in steps {
                let rate = (peak * f).max(1.0);
                let mut o = base_options(opts, kind, &server, entry, self.top);
                o.load = false; // loaded by the closed-loop runs
                o.rate = Some(rate);
                o.stop = Stop::Duration(opts.sweep_duration);
                eprintln!(
                    "-- {} · {} · open loop at {:.0} ops/s ({:.0}% of peak)",
                    entry.name,
                    kind.key(),
                    rate,
                    f * 100.0
                );
                self.run(entry, o, kind, Some(f), None);
            }
        }
        if opts.calibrate && kind.side() == Side::Redis {
            calibrate::calibrate(
                opts,
                kind,
                &server.target,
                self.top,
                entries,
                &mut self.results,
            );
        }
        server.stop()
    }

    /// Phase 1b: redis-benchmark against a fresh `kind` (rushd's RESP
    /// listener, or redis-server), every test at every pipeline. A missing
    /// redis-benchmark skips the phase, except under `RUSH_REQUIRE_ALL=1`
    /// (CI), where it is a failure; an error reply or a failed run is a failure.
    pub(super) fn redis_benchmark(&mut self, kind: ServerKind) -> anyhow::Result<()> {
        let opts = self.opts;
        let bin = redis_benchmark::binary(&opts.redis_server);
        if !redis_benchmark::installed(&bin) {
            let why = format!(
                "{} is not installed (Debian: apt-get install redis-tools)",
                bin.display()
            );
            if std::env::var("RUSH_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                eprintln!("redis-benchmark phase failed: {why}");
                self.results
                    .failures
                    .push(format!("redis-benchmark phase: {why} (RUSH_REQUIRE_ALL=1)"));
            } else {
                eprintln!("redis-benchmark phase skipped: {why}");
            }
            self.results.redis_benchmark_skipped = Some(why);
            return Ok(());
        }
        let server = self.start(kind, self.opts.shards, None)?;
        let Some(addr) = server.resp.clone() else {
            self.results.failures.push(format!(
                "redis-benchmark on {}: the server has no RESP listener",
                kind.label()
            ));
            return server.stop();
        };
        let rows = &mut self.results.redis_benchmark;
        if let Err(e) = redis_benchmark::rows_for(&bin, opts, kind, server.child.id(), &addr, rows)
        {
            eprintln!("   failed: {e:#}");
            self.results
                .failures
                .push(format!("redis-benchmark on {}: {e:#}", kind.label()));
        }
        server.stop()
    }

    /// Phase 2: each family of [`SCALING_FAMILIES`] whose first workload
    /// is selected, on a fresh `kind` of its own (so each footprint is its
    /// own data's).
    pub(super) fn scaling(&mut self, kind: ServerKind, entries: &[&Entry]) -> anyhow::Result<()> {
        let wanted = |name: &str| entries.iter().find(|e| e.name == name).copied();
        for family in SCALING_FAMILIES {
            if let Some(grows) = wanted(family.grows) {
                self.scaling_family(kind, family, grows, wanted(family.then))?;
                self.checkpoint();
            }
        }
        Ok(())
    }

    /// One family of phase 2 on a fresh `kind`: at each size, `grows` (its
    /// preload adds the data up to the size), the footprint of the data,
    /// then `then` at the same size on the same data.
    fn scaling_family(
        &mut self,
        kind: ServerKind,
        family: ScalingFamily,
        grows: &Entry,
        then: Option<&Entry>,
    ) -> anyhow::Result<()> {
        let budget = self
            .opts
            .scale_memory_mb
            .filter(|_| kind == ServerKind::Rush);
        let args: Vec<String> = budget
            .map(|mb| vec!["--memory-mb".into(), mb.to_string()])
            .unwrap_or_default();
        let server = self.start_with(kind, self.opts.shards, None, &args)?;
        if let Some(mb) = budget {
            self.results.scale_memory_mb = Some(mb as u64);
        }
        let empty = probes::footprint(self.rt, &server, kind, grows.name, 0, None)?;
        let mut sizes = self.opts.scale_keys.clone();
        sizes.sort_unstable();
        sizes.dedup();
        // Items `then` stored at the sizes before (links-shorten's links).
        let mut stored = 0;
        for keys in sizes {
            if self.scaling_run(kind, &server, grows, keys).is_none() {
                if let Some(then) = then {
                    eprintln!(
                        "   {} skipped at {} keys: the data is not there",
                        then.name,
                        crate::driver::group(keys)
                    );
                }
                continue;
            }
            self.record_footprint(kind, &server, grows.name, keys + stored, &empty);
            let Some(then) = then else { continue };
            if let Some(ok) = self.scaling_run(kind, &server, then, keys) {
                stored += if family.then_stores { ok } else { 0 };
            }
        }
        server.stop()
    }

    /// `entry` closed-loop at the deepest pipeline with `keys` items (a
    /// workload reading preloaded data loads what it adds); the operations
    /// answered, when it ran.
    fn scaling_run(
        &mut self,
        kind: ServerKind,
        server: &Server,
        entry: &Entry,
        keys: u64,
    ) -> Option<u64> {
        let mut o = base_options(self.opts, kind, server, entry, self.top);
        o.params.keys = keys;
        eprintln!(
            "-- {} · {} · {} keys (scaling)",
            entry.name,
            kind.key(),
            crate::driver::group(keys)
        );
        self.run(entry, o, kind, None, Some(VARIANT_SCALING))
            .map(|r| r.ok)
    }

    /// Measure and keep the footprint of `server` holding `items` items of
    /// `workload`'s data (the preload's and those stored since; or the
    /// failure to).
    fn record_footprint(
        &mut self,
        kind: ServerKind,
        server: &Server,
        workload: &str,
        items: u64,
        empty: &Footprint,
    ) {
        match probes::footprint(self.rt, server, kind, workload, items, Some(empty)) {
            Ok(f) => {
                eprintln!(
                    "   footprint: {} {}, RSS {:.0} MiB, disk {:.0} MiB{}",
                    items,
                    f.items(),
                    f.rss_bytes as f64 / 1048576.0,
                    f.disk_bytes as f64 / 1048576.0,
                    f.used_memory.map_or(String::new(), |u| format!(
                        ", used_memory {:.0} MiB",
                        u as f64 / 1048576.0
                    ))
                );
                self.results.footprint.push(f);
            }
            Err(e) => self.results.failures.push(format!(
                "footprint of {} at {items} {}: {e:#}",
                kind.label(),
                items_of(workload)
            )),
        }
    }

    /// Phase 3: every workload once on a one-shard rushd.
    pub(super) fn one_shard(&mut self, entries: &[&Entry]) -> anyhow::Result<()> {
        let kind = ServerKind::Rush;
        let server = self.start(kind, Some(1), None)?;
        let opts = self.opts;
        for entry in entries {
            let o = base_options(opts, kind, &server, entry, self.top);
            eprintln!("-- {} · rush · 1 shard", entry.name);
            self.run(entry, o, kind, None, Some(VARIANT_ONE_SHARD));
        }
        server.stop()
    }

    /// Phase 4: the headline closed-loop runs again in the pinned layout.
    /// This whole process (the client) is moved to the client's CPU for the
    /// phase and back to its allowed set after it.
    pub(super) fn pinned(&mut self, entries: &[&Entry], pin: &Pin) -> anyhow::Result<()> {
        self.results.pinned = Some(Pinning {
            server_cpu: pin.server_cpu,
            client_cpu: pin.client_cpu,
            client_threads: PINNED_CLIENT_THREADS,
            rush_shards: 1,
        });
        affinity::set_process(&[pin.client_cpu])
            .with_context(|| format!("pinning the client to CPU {}", pin.client_cpu))?;
        let result = self.pinned_runs(entries, pin);
        // The runtime's threads end before the process is let go again.
        self.pinned_rt = None;
        if let Err(e) = affinity::set_process(&pin.allowed) {
            eprintln!("could not give the client back CPUs {:?}: {e}", pin.allowed);
        }
        self.checkpoint();
        result
    }

    fn pinned_runs(&mut self, entries: &[&Entry], pin: &Pin) -> anyhow::Result<()> {
        let here = affinity::allowed(0).context("reading the client's CPU affinity")?;
        anyhow::ensure!(
            here == [pin.client_cpu],
            "the client should run on CPU {} only, but may run on {here:?}",
            pin.client_cpu
        );
        // Built now, from a pinned thread: its threads inherit the CPU.
        self.pinned_rt = Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(PINNED_CLIENT_THREADS)
                .thread_name("rush-bench-pinned")
                .enable_all()
                .build()
                .context("starting the pinned client's runtime")?,
        );
        let opts = self.opts;
        for &kind in &opts.servers {
            // One shard per core, and the server has one.
            let shards = (kind == ServerKind::Rush).then_some(1);
            let server = self.start(kind, shards, Some(pin))?;
            let on = affinity::allowed(server.child.id() as i32)
                .with_context(|| format!("reading {}'s CPU affinity", server.name))?;
            anyhow::ensure!(
                on == [pin.server_cpu],
                "{} should run on CPU {} only, but may run on {on:?}",
                server.name,
                pin.server_cpu
            );
            for entry in entries {
                let o = base_options(opts, kind, &server, entry, self.top);
                eprintln!(
                    "-- {} · {} · {} in flight per connection · pinned (server CPU {}, client CPU {})",
                    entry.name,
                    kind.key(),
                    self.top,
                    pin.server_cpu,
                    pin.client_cpu
                );
                self.run(entry, o, kind, None, Some(VARIANT_PINNED));
            }
            server.stop()?;
            self.checkpoint();
        }
        Ok(())
    }
}
