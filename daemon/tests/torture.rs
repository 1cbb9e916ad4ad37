//! Crash torture: a mixed durable workload (generic keys, short links,
//! purchase limits, red envelopes) against a spawned rushd that is SIGKILLed
//! at random moments, again and again. After every restart: every
//! acknowledged write is there, no code was ever issued twice, every limit
//! count is exact, and every envelope's books balance.

mod common;

use common::Spawned;
use rush_client::protocol::cmd::{AcquireReply, EnvelopeCreate, OrderItem};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientError, ClientOptions};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROUNDS: usize = 15;
const POLICY: &str = "torture";

/// What the workload learned: acknowledged outcomes and attempts whose
/// outcome is unknown (the daemon died before answering).
#[derive(Default, Clone)]
struct Books {
    keys: HashMap<String, String>,
    codes: HashMap<String, String>,
    orders_acked: HashSet<(String, String)>,
    orders_tried: HashSet<(String, String)>,
    envelopes: Vec<u64>,
    grabs: HashMap<(u64, String), u64>,
}

/// xorshift: reproducible randomness without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn client(addr: std::net::SocketAddr) -> Client {
    let opts = ClientOptions {
        retry_deadline: Duration::ZERO,
        request_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    };
    Client::connect_with(&addr.to_string(), opts).await.unwrap()
}

/// Order `order` of one "sku" for `user` under the workload's policy.
async fn acquire(c: &Client, user: &str, order: &str) -> Result<AcquireReply, ClientError> {
    c.limit_acquire(POLICY, user.to_owned(), order, [OrderItem::new("sku", 1)])
        .await
}

/// One writer: a stream of mixed durable requests until the daemon dies.
async fn writer(c: Client, w: usize, round: usize, books: Arc<Mutex<Books>>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((w as u64) << 32) ^ round as u64);
    let mut my_envelope: Option<u64> = None;
    for i in 0.. {
        let tag = format!("r{round}w{w}i{i}");
        let ok = match rng.next() % 4 {
            0 => {
                let v = format!("value-{tag}");
                let r = c.set(format!("k:{tag}"), v.clone()).await;
                if r.is_ok() {
                    books.lock().unwrap().keys.insert(format!("k:{tag}"), v);
                }
                r.is_ok()
            }
            1 => {
                let url = format!("https://shop.example/{tag}");
                match c.shorten(url.clone()).await {
                    Ok(r) => {
                        let mut b = books.lock().unwrap();
                        assert!(
                            b.codes.insert(r.code.clone(), url).is_none(),
                            "code {} issued twice",
                            r.code
                        );
                        true
                    }
                    Err(_) => false,
                }
            }
            2 => {
                let user = format!("user{}", rng.next() % 16);
                let order = format!("o-{tag}");
                books
                    .lock()
                    .unwrap()
                    .orders_tried
                    .insert((user.clone(), order.clone()));
                let r = acquire(&c, &user, &order).await;
                if r.is_ok() {
                    books.lock().unwrap().orders_acked.insert((user, order));
                }
                r.is_ok()
            }
            _ => match my_envelope {
                None => match c
                    .envelope_create(EnvelopeCreate::new(format!("sender{w}"), 5_000, 50))
                    .await
                {
                    Ok(r) => {
                        books.lock().unwrap().envelopes.push(r.id);
                        my_envelope = Some(r.id);
                        true
                    }
                    Err(_) => false,
                },
                Some(id) => {
                    let user = format!("grabber-{tag}");
                    match c.envelope_grab(id, user.clone()).await {
                        Ok(g) => {
                            books
                                .lock()
                                .unwrap()
                                .grabs
                                .insert((id, user), g.amount_cents);
                            true
                        }
                        Err(e) if e.code() == Some(ErrorCode::Empty) => {
                            my_envelope = None;
                            true
                        }
                        Err(_) => false,
                    }
                }
            },
        };
        if !ok {
            break;
        }
    }
}

async fn verify(c: &Client, books: &Books) -> (usize, usize) {
    for (k, v) in &books.keys {
        assert_eq!(
            c.get(k.clone()).await.unwrap().as_deref(),
            Some(v.as_bytes()),
            "key {k}"
        );
    }
    for (code, url) in &books.codes {
        assert_eq!(
            &c.resolve(code.clone()).await.unwrap().target,
            url,
            "code {code}"
        );
    }
    for ((id, user), amount) in &books.grabs {
        let again = c.envelope_grab(*id, user.clone()).await.unwrap();
        assert!(
            again.repeated && again.amount_cents == *amount,
            "grab {id}/{user}"
        );
    }
    let audit = c.envelope_audit().await.unwrap();
    assert!(audit.ok(), "envelope books are off: {:?}", audit.problems);
    // Acknowledged orders were counted: replaying them counts nothing.
    for (user, order) in &books.orders_acked {
        let r = acquire(c, user, order).await.unwrap();
        assert!(r.replayed, "acknowledged order {order} was forgotten");
    }
    (
        books.keys.len() + books.codes.len() + books.grabs.len() + books.orders_acked.len(),
        audit.envelopes as usize,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rushd.toml");
    std::fs::write(
        &conf,
        format!("[limits.policies.{POLICY}]\nwindow = \"fixed:604800\"\ntotal_max = 1000000000\n"),
    )
    .unwrap();
    let data = dir.path().join("data");
    let books = Arc::new(Mutex::new(Books::default()));
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let started = Instant::now();
    let mut checked = 0;
    for round in 0..ROUNDS {
        let mut daemon = Spawned::start(&data, &["--config", conf.to_str().unwrap()]);
        // Everything acknowledged in earlier rounds survived the last kill.
        let c = client(daemon.addr).await;
        let snapshot = books.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (n, _) = verify(&c, &snapshot).await;
        checked += n;
        let mut tasks = Vec::new();
        for w in 0..6 {
            let c = client(daemon.addr).await;
            tasks.push(tokio::spawn(writer(c, w, round, books.clone())));
        }
        // Kill at a random moment 30–330 ms into the load.
        tokio::time::sleep(Duration::from_millis(30 + rng.next() % 300)).await;
        daemon.kill9();
        for t in tasks {
            t.await.unwrap();
        }
    }
    // Final restart: everything, and exact limit counts.
    let daemon = Spawned::start(&data, &["--config", conf.to_str().unwrap()]);
    let c = client(daemon.addr).await;
    let books = books.lock().unwrap().clone();
    let (n, envelopes) = verify(&c, &books).await;
    // Orders whose answer was lost may or may not have counted; replaying
    // every attempted order makes each count exactly once.
    let mut per_user: HashMap<&str, u64> = HashMap::new();
    for (user, order) in &books.orders_tried {
        acquire(&c, user, order).await.unwrap();
        *per_user.entry(user).or_default() += 1;
    }
    for (user, expected) in &per_user {
        let status = c.limit_status(POLICY, user.to_string()).await.unwrap();
        let counted = status
            .allowances
            .iter()
            .find(|a| a.item.is_empty())
            .map(|a| a.count)
            .unwrap_or(0);
        assert_eq!(counted, *expected, "limit count of {user}");
    }
    println!(
        "torture: {ROUNDS} SIGKILLs survived in {:?}; {} acknowledged writes checked after the last restart \
         ({} over all restarts), {} codes all distinct, {} orders counted exactly, {envelopes} envelopes audited",
        started.elapsed(),
        n,
        checked + n,
        books.codes.len(),
        books.orders_tried.len(),
    );
}
