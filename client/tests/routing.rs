//! The routing client against hand-made servers: MOVED is followed at once
//! (even for a request that is not idempotent: nothing was applied) and for
//! good, teaches the client the new map, and can't bounce a call forever; a
//! retired code 7 (once ASK) is an error like any code the client doesn't
//! know, never a redirect.

use bytes::BytesMut;
use rush_client::protocol::cmd::{ClusterNode, ClusterSlotsReply, HelloReply, SlotRange};
use rush_client::protocol::frame::{self, VERSION};
use rush_client::protocol::{
    key_slot, ErrorCode, ErrorDetail, Opcode, Reply, Request, RushError, Target,
};
use rush_client::{Client, ClientError};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

type Answer = dyn Fn(&Request) -> Result<Reply, RushError> + Send + Sync;

/// A hand-made node: answers HELLO as a node would (its node id is its
/// address), CLUSTER_SLOTS with `map()`, and every other request with
/// `answer`, counting those.
struct Fake {
    addr: String,
    seen: Arc<AtomicU64>,
}

impl Fake {
    fn seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }
}

async fn fake(
    map: impl Fn() -> ClusterSlotsReply + Send + Sync + 'static,
    answer: impl Fn(&Request) -> Result<Reply, RushError> + Send + Sync + 'static,
) -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen = Arc::new(AtomicU64::new(0));
    let answer: Arc<Answer> = Arc::new(answer);
    let map = Arc::new(map);
    let (counter, me) = (seen.clone(), addr.clone());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let (answer, map, counter, me) =
                (answer.clone(), map.clone(), counter.clone(), me.clone());
            tokio::spawn(async move {
                let mut buf = BytesMut::new();
                loop {
                    while let Some(f) = frame::parse(&mut buf, 1 << 20).unwrap() {
                        let req = Request::decode(f.header.opcode, f.body).unwrap();
                        let result = match req.opcode() {
                            Opcode::Hello => Ok(Reply::Hello(HelloReply {
                                protocol: VERSION,
                                server: "fake".into(),
                                node_id: me.clone(),
                                shards: 1,
                                admin: true,
                            })),
                            Opcode::ClusterSlots => Ok(Reply::ClusterSlots(map())),
                            _ => {
                                counter.fetch_add(1, Ordering::SeqCst);
                                answer(&req)
                            }
                        };
                        let mut out = BytesMut::new();
                        match result {
                            Ok(r) => frame::encode_ok(
                                &mut out,
                                f.header.opcode,
                                f.header.request_id,
                                |b| r.encode_body(b),
                            ),
                            Err(e) => frame::encode_error(
                                &mut out,
                                f.header.opcode,
                                f.header.request_id,
                                &e,
                            ),
                        }
                        s.write_all(&out).await.unwrap();
                    }
                    if s.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                        return;
                    }
                }
            });
        }
    });
    Fake { addr, seen }
}

/// The map of a node that was never given one.
fn lone() -> ClusterSlotsReply {
    ClusterSlotsReply::default()
}

fn slot_of(req: &Request) -> u16 {
    match req.target() {
        Ok(Target::Slot(s)) => s,
        other => panic!("{:?} has target {other:?}", req.opcode()),
    }
}

/// What a node serving every key answers.
fn serve(req: &Request) -> Result<Reply, RushError> {
    Ok(match req.opcode() {
        Opcode::Get => Reply::Get(Some("there".into())),
        Opcode::IncrBy => Reply::IncrBy(1),
        other => panic!("unexpected {other:?}"),
    })
}

/// A node that serves every key (the target), and one in front of it that
/// answers every request with `redirect(slot, target address)`: (front,
/// target).
async fn front_and_target(
    redirect: impl Fn(u16, String) -> RushError + Send + Sync + 'static,
) -> (Fake, Fake) {
    let target = fake(lone, serve).await;
    let to = target.addr.clone();
    let front = fake(lone, move |req| Err(redirect(slot_of(req), to.clone()))).await;
    (front, target)
}

/// A key whose slot is in `slots` and none of `not`.
fn key_in(slots: RangeInclusive<u16>, not: &[u16]) -> String {
    (0..)
        .map(|i| format!("k{i}"))
        .find(|k| {
            let slot = key_slot(k.as_bytes());
            slots.contains(&slot) && !not.contains(&slot)
        })
        .unwrap()
}

#[tokio::test]
async fn moved_is_followed_at_once_and_for_good() {
    let (first, target) = front_and_target(RushError::moved).await;
    let c = Client::connect(&first.addr).await.unwrap();
    // INCRBY is not idempotent, yet MOVED is followed: nothing was applied.
    assert_eq!(c.incr_by("n", 1).await.unwrap(), 1);
    assert_eq!((first.seen(), target.seen()), (1, 1));
    assert_eq!(c.stats().moved, 1);
    assert_eq!(c.stats().retries, 0, "a redirect is not a retry");
    // The slot now goes straight to the target.
    assert_eq!(c.incr_by("n", 1).await.unwrap(), 1);
    assert_eq!((first.seen(), target.seen()), (1, 2));
    // Other slots still go to the first node (which moves them too).
    assert!(c.get(key_in(0..=16383, &[key_slot(b"n")])).await.is_ok());
    assert_eq!((first.seen(), target.seen()), (2, 3));
    assert_eq!(c.stats().moved, 2);
}

#[tokio::test]
async fn moved_loads_the_map_from_the_node_it_names() {
    // Two nodes at epoch 2: `first` has 0–8191, `target` 8192–16383. The
    // first node still answers CLUSTER_SLOTS as a lone node would (it
    // hasn't heard), so only the MOVED can teach the client the map.
    let addrs: Arc<OnceLock<(String, String)>> = Arc::new(OnceLock::new());
    let known = addrs.clone();
    let two_nodes = move || {
        let (a, b) = known.get().expect("both nodes started").clone();
        let node = |addr: String, start, end| ClusterNode {
            id: addr.clone(),
            addr,
            ranges: vec![SlotRange { start, end }],
            resp_addr: None,
            replica_of: None,
        };
        ClusterSlotsReply {
            epoch: 2,
            nodes: vec![node(a, 0, 8191), node(b, 8192, 16383)],
        }
    };
    let target = fake(two_nodes, serve).await;
    let to = target.addr.clone();
    let first = fake(lone, move |req| {
        let slot = slot_of(req);
        if slot >= 8192 {
            Err(RushError::moved(slot, to.clone()))
        } else {
            serve(req)
        }
    })
    .await;
    addrs
        .set((first.addr.clone(), target.addr.clone()))
        .unwrap();
    let c = Client::connect(&first.addr).await.unwrap();
    let moved_key = key_in(8192..=16383, &[]);
    assert!(c.get(moved_key.clone()).await.is_ok());
    assert_eq!((first.seen(), target.seen()), (1, 1));
    // The map is loaded in the background, from the node the MOVED named.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.cluster_map().map(|m| m.epoch) != Some(2) {
        assert!(Instant::now() < deadline, "the map was never loaded");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Another slot of the target's goes there without a MOVED of its own;
    // the first node's slots still go to the first node.
    let unseen = key_in(8192..=16383, &[key_slot(moved_key.as_bytes())]);
    assert!(c.get(unseen).await.is_ok());
    assert!(c.get(key_in(0..=8191, &[])).await.is_ok());
    assert_eq!((first.seen(), target.seen()), (2, 2));
    assert_eq!(c.stats().moved, 1);
}

#[tokio::test]
async fn nodes_that_disagree_end_a_call_with_their_moved() {
    // Each node says the other serves every slot.
    let addrs: Arc<OnceLock<(String, String)>> = Arc::new(OnceLock::new());
    let (ka, kb) = (addrs.clone(), addrs.clone());
    let a = fake(lone, move |req| {
        Err(RushError::moved(slot_of(req), ka.get().unwrap().1.clone()))
    })
    .await;
    let b = fake(lone, move |req| {
        Err(RushError::moved(slot_of(req), kb.get().unwrap().0.clone()))
    })
    .await;
    addrs.set((a.addr.clone(), b.addr.clone())).unwrap();
    let c = Client::connect(&a.addr).await.unwrap();
    let e = c.get("k").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Moved), "{e}");
    assert!(e.not_applied());
    // The client followed MAX_REDIRECTS (16) of them, then gave up with the
    // last one: one call, 17 sends, no endless ping-pong.
    assert_eq!(c.stats().moved, 16);
    assert_eq!(a.seen() + b.seen(), 17);
    assert_eq!(c.stats().requests, 1);
}

#[tokio::test]
async fn a_call_to_a_fixed_node_returns_moved_unfollowed() {
    let (first, target) = front_and_target(RushError::moved).await;
    let c = Client::connect(&first.addr).await.unwrap();
    let get = rush_client::protocol::cmd::Get { key: "k".into() };
    let e = c.call_on(&first.addr, get).await.unwrap_err();
    let ClientError::Server(RushError {
        code: ErrorCode::Moved,
        detail: ErrorDetail::Redirect { slot, addr },
        ..
    }) = &e
    else {
        panic!("{e}")
    };
    assert_eq!(
        (*slot, addr.as_str()),
        (key_slot(b"k"), target.addr.as_str())
    );
    assert_eq!((first.seen(), target.seen(), c.stats().moved), (1, 0, 0));
}

#[tokio::test]
async fn retired_code_7_is_an_error_not_a_redirect() {
    // An old server's ASK: code 7 with a redirect to another node.
    let (first, target) = front_and_target(|slot, addr| {
        RushError::new(ErrorCode::from_u8(7), "ask elsewhere")
            .with_detail(ErrorDetail::Redirect { slot, addr })
    })
    .await;
    let c = Client::connect(&first.addr).await.unwrap();
    let e = c.get("k").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Other(7)), "{e}");
    assert!(
        !e.not_applied(),
        "an unknown code says nothing about whether the request was applied"
    );
    assert_eq!(
        (first.seen(), target.seen()),
        (1, 0),
        "neither followed nor retried"
    );
    assert_eq!((c.stats().moved, c.stats().retries), (0, 0));
}
