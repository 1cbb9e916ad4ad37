//! The routing client against hand-made servers: it follows ASK once at the
//! named node without changing its map, and follows MOVED for good.

use bytes::BytesMut;
use rush_client::protocol::cmd::{ClusterSlotsReply, HelloReply};
use rush_client::protocol::frame::{self, VERSION};
use rush_client::protocol::{Opcode, Reply, Request, RushError};
use rush_client::Client;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server answering every GET with `answer(count)`; HELLO and
/// CLUSTER_SLOTS (a lone node) as a node would. Returns its address and
/// how many GETs it saw.
async fn fake(
    answer: impl Fn(u64) -> Result<Reply, RushError> + Send + Sync + 'static,
) -> (String, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let gets = Arc::new(AtomicU64::new(0));
    let (answer, seen, me) = (Arc::new(answer), gets.clone(), addr.clone());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let (answer, seen, me) = (answer.clone(), seen.clone(), me.clone());
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
                            Opcode::ClusterSlots => {
                                Ok(Reply::ClusterSlots(ClusterSlotsReply::default()))
                            }
                            _ => answer(seen.fetch_add(1, Ordering::SeqCst) + 1),
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
    (addr, gets)
}

#[tokio::test]
async fn ask_is_followed_once_and_moved_for_good() {
    let (target, target_gets) = fake(|_| Ok(Reply::Get(Some("there".into())))).await;
    let t = target.clone();
    // The first node sends every GET elsewhere: the first with ASK, the
    // rest with MOVED.
    let (first, first_gets) = fake(move |n| {
        if n == 1 {
            Err(RushError::ask(5, t.clone()))
        } else {
            Err(RushError::moved(5, t.clone()))
        }
    })
    .await;
    let c = Client::connect(&first).await.unwrap();
    assert_eq!(c.get("x").await.unwrap().as_deref(), Some(&b"there"[..]));
    assert_eq!(
        (
            first_gets.load(Ordering::SeqCst),
            target_gets.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
    assert_eq!(c.stats().asked, 1);
    // ASK changed nothing: the next request goes to the first node again,
    // which says MOVED; after that the slot goes straight to the target.
    // ("x" is not in slot 5, but the redirect names slot 5: what counts is
    // the slot of the request, so use a key of slot 5.)
    let key = (0..)
        .map(|i| format!("k{i}"))
        .find(|k| rush_client::protocol::key_slot(k.as_bytes()) == 5)
        .unwrap();
    assert!(c.get(key.clone()).await.is_ok());
    assert_eq!(first_gets.load(Ordering::SeqCst), 2);
    assert_eq!(c.stats().moved, 1);
    assert!(c.get(key).await.is_ok());
    assert_eq!(
        first_gets.load(Ordering::SeqCst),
        2,
        "the moved slot went to the target"
    );
    assert_eq!(target_gets.load(Ordering::SeqCst), 3);
}
