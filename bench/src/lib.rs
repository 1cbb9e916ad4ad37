//! rush-bench: drives `rushd` and, side by side, a real Redis with the same
//! work and the same client settings, and reports both.
//!
//! - [`workload`]: the [`Workload`](workload::Workload) trait (a Rush side
//!   and a Redis side per workload) and the registry
//!   [`WORKLOADS`](workload::WORKLOADS); the workloads are in [`workloads`].
//! - [`driver`]: closed-loop and open-loop (coordinated-omission corrected)
//!   load, histograms, errors by type, progress.
//! - [`suite`]: starts rushd and redis-server (twice: `appendfsync everysec`
//!   and `always`) on loopback, runs every workload against each, and
//!   [`report`] writes `REPORT.md` with [`charts`].
//!
//! The library entry point for one run is [`run`].

pub mod charts;
pub mod dist;
pub mod driver;
pub mod goals;
pub mod report;
pub mod scrape;
pub mod stats;
pub mod suite;
pub mod target;
pub mod workload;
pub mod workloads;

pub use dist::Dist;
pub use driver::{RunOptions, Stop};
pub use stats::RunReport;
pub use target::{Side, Target};
pub use workload::{Params, WORKLOADS};

/// Run the workload called `name` as `opts` say.
pub async fn run(name: &str, opts: RunOptions) -> anyhow::Result<RunReport> {
    let entry = workload::find(name).ok_or_else(|| {
        let names: Vec<&str> = WORKLOADS.iter().map(|e| e.name).collect();
        anyhow::anyhow!("unknown workload {name:?}; known: {}", names.join(", "))
    })?;
    entry.run(opts).await
}
