//! Counters and histograms the request path updates without a lock, a
//! label lookup or a contended atomic.
//!
//! Every metric keeps one cell per writer, each on its own cache line: one
//! per shard thread, plus one shared cell for every other thread. A shard
//! thread says which shard it is once ([`enter_shard`], a thread-local), and
//! from then on an increment is a plain load and store on a line only that
//! thread writes (a relaxed atomic, so the scrape may read it at any time).
//! Other threads (the node's tasks) add to the shared cell with `fetch_add`.
//! A scrape sums the cells.
//!
//! Label sets are resolved once, when a handle is made
//! ([`CounterVec::with_label_values`]), never per request.

use prometheus::core::{Collector, Desc};
use prometheus::proto;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

thread_local! {
    /// 0: not a shard thread (the shared cell); i + 1: shard i.
    static WRITER: Cell<usize> = const { Cell::new(0) };
}

/// The calling thread is shard `id`'s: its updates go to that shard's cells.
pub fn enter_shard(id: usize) {
    WRITER.with(|w| w.set(id + 1));
}

#[inline]
fn writer() -> usize {
    WRITER.with(Cell::get)
}

#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

/// Cells for `writers` writers (shards + the shared one).
fn cells(writers: usize) -> Arc<[Padded]> {
    (0..writers.max(1)).map(|_| Padded::default()).collect()
}

#[inline]
fn add(cells: &[Padded], n: u64) {
    let w = writer();
    match cells.get(w) {
        // Only this shard's thread writes this cell.
        Some(c) if w > 0 => c.0.store(
            c.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        ),
        _ => {
            cells[0].0.fetch_add(n, Ordering::Relaxed);
        }
    }
}

fn sum(cells: &[Padded]) -> u64 {
    cells
        .iter()
        .fold(0u64, |a, c| a.wrapping_add(c.0.load(Ordering::Relaxed)))
}

/// A monotonic counter (`IntCounter`'s interface).
#[derive(Clone)]
pub struct Counter(Arc<[Padded]>);

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counter({})", self.get())
    }
}

impl Counter {
    #[inline]
    pub fn inc(&self) {
        add(&self.0, 1)
    }

    #[inline]
    pub fn inc_by(&self, n: u64) {
        add(&self.0, n)
    }

    /// A counter with no family (not exported), for tests and internals.
    pub fn detached(writers: usize) -> Counter {
        Counter(cells(writers))
    }

    pub fn get(&self) -> u64 {
        sum(&self.0)
    }
}

/// A gauge moved by deltas (`add`/`sub`), summed over writers at scrape.
#[derive(Clone)]
pub struct Gauge {
    desc: Arc<Desc>,
    cells: Arc<[Padded]>,
}

impl Gauge {
    pub fn new(name: &str, help: &str, writers: usize) -> Gauge {
        Gauge {
            desc: Arc::new(
                Desc::new(
                    name.to_string(),
                    help.to_string(),
                    Vec::new(),
                    HashMap::new(),
                )
                .expect("valid metric"),
            ),
            cells: cells(writers),
        }
    }

    #[inline]
    pub fn add(&self, n: i64) {
        add(&self.cells, n as u64)
    }

    #[inline]
    pub fn sub(&self, n: i64) {
        add(&self.cells, (n as u64).wrapping_neg())
    }

    pub fn get(&self) -> i64 {
        sum(&self.cells) as i64
    }
}

impl Collector for Gauge {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        let mut m = proto::Metric::default();
        let mut g = proto::Gauge::default();
        g.set_value(self.get() as f64);
        m.set_gauge(g);
        vec![family(&self.desc, proto::MetricType::GAUGE, vec![m])]
    }
}

/// A family of counters with labels. Registered on the node's registry;
/// each `with_label_values` handle is resolved once and kept.
pub struct CounterVec {
    family: Family<Counter>,
    writers: usize,
}

impl CounterVec {
    pub fn new(name: &str, help: &str, labels: &[&str], writers: usize) -> CounterVec {
        CounterVec {
            family: Family::new(name, help, labels),
            writers,
        }
    }

    /// The counter of one label set (made on first use; the same handle
    /// every time after).
    pub fn with_label_values(&self, values: &[&str]) -> Counter {
        self.family.child(values, || Counter(cells(self.writers)))
    }
}

/// What a labelled family holds: its description and one child per label
/// set, in the order they were first asked for.
struct Family<T> {
    desc: Desc,
    children: Mutex<Vec<(Vec<String>, T)>>,
}

impl<T: Clone> Family<T> {
    fn new(name: &str, help: &str, labels: &[&str]) -> Self {
        Family {
            desc: Desc::new(
                name.to_string(),
                help.to_string(),
                labels.iter().map(|l| l.to_string()).collect(),
                HashMap::new(),
            )
            .expect("valid metric"),
            children: Mutex::new(Vec::new()),
        }
    }

    /// The child of one label set, made by `make` on first use.
    fn child(&self, values: &[&str], make: impl FnOnce() -> T) -> T {
        let mut children = self.children.lock().expect("not poisoned");
        if let Some((_, c)) = children
            .iter()
            .find(|(v, _)| v.iter().map(String::as_str).eq(values.iter().copied()))
        {
            return c.clone();
        }
        let c = make();
        children.push((values.iter().map(|v| v.to_string()).collect(), c.clone()));
        c
    }

    /// One metric family of `kind`, a metric per child as `fill` makes it.
    fn collect(
        &self,
        kind: proto::MetricType,
        fill: impl Fn(&mut proto::Metric, &T),
    ) -> Vec<proto::MetricFamily> {
        let children = self.children.lock().expect("not poisoned");
        let metrics = children
            .iter()
            .map(|(values, c)| {
                let mut m = proto::Metric::from_label(labels(&self.desc.variable_labels, values));
                fill(&mut m, c);
                m
            })
            .collect();
        vec![family(&self.desc, kind, metrics)]
    }
}

fn labels(names: &[String], values: &[String]) -> Vec<proto::LabelPair> {
    names
        .iter()
        .zip(values)
        .map(|(n, v)| {
            let mut l = proto::LabelPair::default();
            l.set_name(n.clone());
            l.set_value(v.clone());
            l
        })
        .collect()
}

fn family(
    desc: &Desc,
    kind: proto::MetricType,
    metrics: Vec<proto::Metric>,
) -> proto::MetricFamily {
    let mut f = proto::MetricFamily::default();
    f.set_name(desc.fq_name.clone());
    f.set_help(desc.help.clone());
    f.set_field_type(kind);
    f.set_metric(metrics);
    f
}

impl Collector for CounterVec {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.family.desc]
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        self.family.collect(proto::MetricType::COUNTER, |m, c| {
            let mut v = proto::Counter::default();
            v.set_value(c.get() as f64);
            m.set_counter(v);
        })
    }
}

/// A histogram (fixed buckets), one set of cells per writer.
#[derive(Clone)]
pub struct Histogram(Arc<HistogramCells>);

pub struct HistogramCells {
    bounds: Arc<[f64]>,
    /// Per writer: a count per bucket (the last is +Inf), the count, the
    /// sum in nanounits.
    per_writer: Box<[WriterHist]>,
}

struct WriterHist {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    /// Sum of observed values × 1e9, so integer adds are exact enough.
    sum_nano: AtomicU64,
    _pad: [u64; 6],
}

impl Histogram {
    pub fn new(bounds: &[f64], writers: usize) -> Histogram {
        let bounds: Arc<[f64]> = bounds.into();
        Histogram(Arc::new(HistogramCells {
            per_writer: (0..writers.max(1))
                .map(|_| WriterHist {
                    buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
                    count: AtomicU64::new(0),
                    sum_nano: AtomicU64::new(0),
                    _pad: [0; 6],
                })
                .collect(),
            bounds,
        }))
    }

    #[inline]
    pub fn observe(&self, v: f64) {
        let h = &self.0;
        let i = h
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(h.bounds.len());
        let nano = (v.max(0.0) * 1e9) as u64;
        let w = writer();
        match h.per_writer.get(w) {
            Some(c) if w > 0 => {
                let inc = |a: &AtomicU64, n: u64| {
                    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed)
                };
                inc(&c.buckets[i], 1);
                inc(&c.count, 1);
                inc(&c.sum_nano, nano);
            }
            _ => {
                let c = &h.per_writer[0];
                c.buckets[i].fetch_add(1, Ordering::Relaxed);
                c.count.fetch_add(1, Ordering::Relaxed);
                c.sum_nano.fetch_add(nano, Ordering::Relaxed);
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.0
            .per_writer
            .iter()
            .map(|w| w.count.load(Ordering::Relaxed))
            .sum()
    }

    fn proto(&self) -> proto::Histogram {
        let h = &self.0;
        let mut counts = vec![0u64; h.bounds.len() + 1];
        let (mut count, mut sum) = (0u64, 0u64);
        for w in h.per_writer.iter() {
            for (c, b) in counts.iter_mut().zip(w.buckets.iter()) {
                *c += b.load(Ordering::Relaxed);
            }
            count += w.count.load(Ordering::Relaxed);
            sum = sum.wrapping_add(w.sum_nano.load(Ordering::Relaxed));
        }
        let mut out = proto::Histogram::default();
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(h.bounds.len());
        for (b, c) in h.bounds.iter().zip(&counts) {
            cumulative += c;
            let mut bucket = proto::Bucket::default();
            bucket.set_upper_bound(*b);
            bucket.set_cumulative_count(cumulative);
            buckets.push(bucket);
        }
        out.set_bucket(buckets);
        out.set_sample_count(count);
        out.set_sample_sum(sum as f64 / 1e9);
        out
    }
}

/// A family of histograms with labels.
pub struct HistogramVec {
    family: Family<Histogram>,
    bounds: Vec<f64>,
    writers: usize,
}

impl HistogramVec {
    pub fn new(name: &str, help: &str, labels: &[&str], bounds: &[f64], writers: usize) -> Self {
        HistogramVec {
            family: Family::new(name, help, labels),
            bounds: bounds.to_vec(),
            writers,
        }
    }

    pub fn with_label_values(&self, values: &[&str]) -> Histogram {
        self.family
            .child(values, || Histogram::new(&self.bounds, self.writers))
    }
}

impl Collector for HistogramVec {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.family.desc]
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        self.family.collect(proto::MetricType::HISTOGRAM, |m, h| {
            m.set_histogram(h.proto())
        })
    }
}

/// A counter without labels, registered on the registry.
pub fn counter(r: &prometheus::Registry, name: &str, help: &str, writers: usize) -> Counter {
    register(r, CounterVec::new(name, help, &[], writers)).with_label_values(&[])
}

/// Export a counter another part of the node keeps (storage's, made with
/// [`Counter::detached`]) under `name`, read at every scrape.
pub fn export_counter(r: &prometheus::Registry, name: &str, help: &str, c: &Counter) {
    let v = CounterVec::new(name, help, &[], 1);
    v.family.child(&[], || c.clone());
    register(r, v);
}

/// A gauge moved by deltas, registered on the registry.
pub fn gauge(r: &prometheus::Registry, name: &str, help: &str, writers: usize) -> Gauge {
    let g = Gauge::new(name, help, writers);
    r.register(Box::new(g.clone()))
        .expect("metric names are unique");
    g
}

/// Register a collector on the registry (names are unique by construction)
/// and hand back a shared handle to it.
pub fn register<C: Collector + 'static>(r: &prometheus::Registry, c: C) -> Arc<C> {
    let c = Arc::new(c);
    r.register(Box::new(Shared(c.clone())))
        .expect("metric names are unique");
    c
}

struct Shared<C>(Arc<C>);

impl<C: Collector> Collector for Shared<C> {
    fn desc(&self) -> Vec<&Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        self.0.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_and_other_threads_add_up() {
        let r = prometheus::Registry::new_custom(Some("t".into()), None).unwrap();
        let v = register(&r, CounterVec::new("hits_total", "hits", &["kind"], 3));
        let a = v.with_label_values(&["a"]);
        a.inc();
        let handles: Vec<_> = (0..2)
            .map(|shard| {
                let a = v.with_label_values(&["a"]);
                std::thread::spawn(move || {
                    enter_shard(shard);
                    for _ in 0..1000 {
                        a.inc();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(a.get(), 2001);
        let h = register(
            &r,
            HistogramVec::new("lat_seconds", "lat", &["op"], &[0.1, 1.0], 3),
        );
        let g = h.with_label_values(&["GET"]);
        g.observe(0.05);
        g.observe(0.5);
        g.observe(5.0);
        use prometheus::Encoder;
        let mut out = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&r.gather(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("t_hits_total{kind=\"a\"} 2001"), "{text}");
        assert!(
            text.contains("t_lat_seconds_bucket{op=\"GET\",le=\"0.1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("t_lat_seconds_bucket{op=\"GET\",le=\"1\"} 2"),
            "{text}"
        );
        assert!(text.contains("t_lat_seconds_count{op=\"GET\"} 3"), "{text}");
    }
}
