//! This release's client against nodes of other releases (PROTOCOL.md,
//! "Compatibility"): a node of the release before — no SHARDS, LINK_RESOLVE
//! answers without `drop_query` — and a node of a later release, whose
//! answers carry fields this client doesn't know. Such nodes can't be
//! started from this tree, so a small fake speaks for them, over a real
//! socket, to the real `Client`.

use crate::Client;
use bytes::{BufMut, BytesMut};
use rush_protocol::cmd::{ClusterSlotsReply, HelloReply, ResolveReply};
use rush_protocol::frame::{self, VERSION};
use rush_protocol::{ErrorCode, Opcode, RushError, Wire};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the fake node appends to every GET answer: a field of a later
/// release.
const LATER_FIELD: &[u8] = &[0xab, 0xcd, 0xef];

/// A node of the release before, with two shards, where every GET answers
/// "v" with [`LATER_FIELD`] after it (as a later release would).
async fn old_node() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = BytesMut::new();
                loop {
                    while let Ok(Some(f)) = frame::parse(&mut buf, 1 << 20) {
                        let mut out = BytesMut::new();
                        answer(f.header.opcode, f.header.request_id, &mut out);
                        if s.write_all(&out).await.is_err() {
                            return;
                        }
                    }
                    if matches!(s.read_buf(&mut buf).await, Ok(0) | Err(_)) {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn answer(opcode: u8, id: u64, out: &mut BytesMut) {
    let ok =
        |out: &mut BytesMut, body: &[u8]| frame::encode_ok(out, opcode, id, |b| b.put_slice(body));
    match Opcode::from_u8(opcode) {
        Some(Opcode::Hello) => ok(
            out,
            &HelloReply {
                protocol: VERSION,
                server: "0.0.9".into(),
                node_id: "old".into(),
                shards: 2,
                admin: false,
            }
            .to_bytes(),
        ),
        Some(Opcode::ClusterSlots) => ok(
            out,
            &ClusterSlotsReply {
                epoch: 0,
                nodes: vec![],
            }
            .to_bytes(),
        ),
        Some(Opcode::LinkResolve) => {
            // The release before ended the answer after `expires_at`.
            let new = ResolveReply {
                target: "https://e.com/a".into(),
                ios: None,
                android: None,
                permanent: false,
                expires_at: 0,
                drop_query: false,
            }
            .to_bytes();
            ok(out, &new[..new.len() - 1]);
        }
        Some(Opcode::Get) => {
            let mut body = Some(bytes::Bytes::from_static(b"v")).to_bytes().to_vec();
            body.extend_from_slice(LATER_FIELD);
            ok(out, &body);
        }
        // SHARDS among them: that release didn't have it.
        _ => frame::encode_error(
            out,
            opcode,
            id,
            &RushError::new(
                ErrorCode::UnknownOpcode,
                format!("unknown opcode 0x{opcode:02x}"),
            ),
        ),
    }
}

#[tokio::test]
async fn this_client_talks_to_older_and_newer_nodes() {
    let addr = old_node().await;
    // No SHARDS: one connection (the node forwards between its shards).
    let c = Client::connect(&addr).await.unwrap();
    let node = c.node(&addr);
    let conn = node.conn.lock().await.clone().expect("connected");
    assert_eq!(conn.len(), 1);
    // An answer without `drop_query`: that release dropped every query.
    let link = c.resolve("abcde").await.unwrap();
    assert_eq!(link.target, "https://e.com/a");
    assert!(link.drop_query);
    // An answer with a field this client doesn't know: ignored.
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
}
