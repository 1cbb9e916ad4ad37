//! Whatever bytes a client sends, it gets a typed error or a clean close of
//! its own connection, and the daemon keeps serving everyone else.

mod common;

use bytes::{BufMut, BytesMut};
use common::TestNode;
use rush_client::protocol::cmd::{
    Batch, Compact, EnvelopeRefunds, Get, HDel, HSet, Hello, HelloReply, Ping, RefundCursor, Set,
};
use rush_client::protocol::frame::{self, Frame, Header};
use rush_client::protocol::{Command, ErrorCode, Opcode, RushError, Wire};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn raw(node: &TestNode) -> TcpStream {
    TcpStream::connect(node.addr()).await.unwrap()
}

fn request(opcode: u8, id: u64, body: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    frame::encode(&mut b, Header::request(opcode, id), |out| {
        out.put_slice(body)
    });
    b
}

/// Read the next frame, or None when the server closed the connection.
async fn next_frame(s: &mut TcpStream) -> Option<Frame> {
    let mut buf = BytesMut::new();
    loop {
        if let Some(f) = frame::parse(&mut buf, 1 << 20).unwrap() {
            return Some(f);
        }
        let n = tokio::time::timeout(Duration::from_secs(10), s.read_buf(&mut buf))
            .await
            .expect("server answers or closes within 10 s")
            .unwrap_or(0);
        if n == 0 {
            assert!(buf.is_empty(), "closed mid-frame");
            return None;
        }
    }
}

/// Send `cmd` as request `id` and read its answer (nothing else may be in
/// flight on `s`).
async fn call<C: Command>(s: &mut TcpStream, id: u64, cmd: &C) -> Result<C::Reply, RushError> {
    let mut b = BytesMut::new();
    frame::encode(&mut b, Header::request(C::OPCODE.as_u8(), id), |out| {
        cmd.encode(out)
    });
    s.write_all(&b).await.unwrap();
    let f = next_frame(s).await.expect("an answer");
    assert_eq!(
        (f.header.request_id, f.header.opcode, f.header.flags),
        (id, C::OPCODE.as_u8(), frame::FLAG_RESPONSE),
        "the answer echoes the request"
    );
    frame::decode_response::<C::Reply>(f.body).unwrap()
}

fn hello(token: Option<&str>) -> Hello {
    Hello {
        version: frame::VERSION,
        token: token.map(str::to_string),
        client: "bad_input".into(),
    }
}

fn error_of(f: &Frame) -> RushError {
    frame::decode_response::<()>(f.body.clone())
        .unwrap()
        .unwrap_err()
}

/// Sends a raw request and reads its answer, which must be an error for
/// that request (its id echoed), on a connection that stays open.
async fn refused(s: &mut TcpStream, opcode: u8, id: u64, body: &[u8]) -> RushError {
    s.write_all(&request(opcode, id, body)).await.unwrap();
    let f = next_frame(s).await.expect("an answer");
    assert_eq!(f.header.request_id, id, "the answer carries the request id");
    error_of(&f)
}

/// Sends `cmd`, which must be refused as BAD_REQUEST (`what` says why).
async fn bad_request<C: Command>(s: &mut TcpStream, id: u64, cmd: &C, what: &str) {
    match call(s, id, cmd).await {
        Err(e) => assert_eq!(e.code, ErrorCode::BadRequest, "{what}: {e}"),
        Ok(_) => panic!("{what}: answered OK"),
    }
}

/// Reads the one error the server answers before it closes the connection.
async fn error_then_close(s: &mut TcpStream) -> (Header, RushError) {
    let f = next_frame(s).await.expect("an error answer");
    assert!(
        next_frame(s).await.is_none(),
        "then the connection is closed"
    );
    (f.header, error_of(&f))
}

/// Sends `bytes` on a connection of its own: the error that closes it.
async fn closing_error(node: &TestNode, bytes: &[u8]) -> (Header, RushError) {
    let mut s = raw(node).await;
    s.write_all(bytes).await.unwrap();
    error_then_close(&mut s).await
}

/// A length-prefixed field that claims `len` bytes and brings `bytes`.
fn field(len: u32, bytes: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u32(len);
    b.put_slice(bytes);
    b
}

async fn still_serving(node: &TestNode) {
    let client = common::connect(node.addr()).await;
    client.set("alive", "yes").await.unwrap();
    assert_eq!(
        client.get("alive").await.unwrap().as_deref(),
        Some(&b"yes"[..])
    );
    node.client.ping().await.unwrap();
}

fn ping(id: u64) -> BytesMut {
    request(0x01, id, &field(2, b"ok"))
}

#[tokio::test]
async fn oversized_length_prefix_is_refused_before_reading() {
    let node = TestNode::start().await;
    // A 4 GiB frame announced with a full header, and no body ever sent.
    let mut b = BytesMut::new();
    b.put_u32(u32::MAX);
    b.put_slice(&[1, 0x11, 0, 0]);
    b.put_u64(77);
    let (header, e) = closing_error(&node, &b).await;
    assert_eq!(header.request_id, 77, "the answer carries the request id");
    assert_eq!(e.code, ErrorCode::TooLarge);
    still_serving(&node).await;
    node.stop().await;
}

#[tokio::test]
async fn garbage_bytes_close_only_that_connection() {
    let node = TestNode::start().await;
    // Text where a length should be: "GET " is a 1.2 GB length.
    let (_, e) = closing_error(&node, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(e.code, ErrorCode::TooLarge);
    // A length too short to hold a header.
    let (_, e) = closing_error(&node, &[0, 0, 0, 3, 0xde, 0xad, 0xbe]).await;
    assert_eq!(e.code, ErrorCode::BadRequest);
    still_serving(&node).await;
    node.stop().await;
}

#[tokio::test]
async fn truncated_frame_then_close() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    let whole = ping(1);
    s.write_all(&whole[..whole.len() - 3]).await.unwrap();
    s.shutdown().await.unwrap();
    assert!(
        next_frame(&mut s).await.is_none(),
        "no answer to half a frame; closed"
    );
    still_serving(&node).await;
    node.stop().await;
}

#[tokio::test]
async fn half_a_frame_then_silence_times_out() {
    let node = TestNode::start_with(|c| c.server.frame_timeout_secs = 1).await;
    let mut s = raw(&node).await;
    let whole = ping(1);
    s.write_all(&whole[..7]).await.unwrap();
    // Meanwhile others are served.
    still_serving(&node).await;
    assert!(
        next_frame(&mut s).await.is_none(),
        "the stalled connection is closed"
    );
    node.stop().await;
}

/// The frame timeout counts the client's silence, not the server's: while
/// the server holds a pipeline back (answers it has not written yet; here
/// the client takes them late, as when commits are slow), the frame left
/// half-read doesn't time out, and every request is answered.
#[tokio::test]
async fn a_frame_the_server_holds_back_does_not_time_out() {
    let node = TestNode::start_with(|c| {
        c.server.frame_timeout_secs = 1;
        c.server.max_output_bytes = 1 << 20;
    })
    .await;
    let value = "v".repeat(256 * 1024);
    node.client.set("big", value.clone()).await.unwrap();
    let mut s = raw(&node).await;
    // 16 MiB of answers: more than the socket buffers and half of
    // `max_output_bytes` (1 MiB) hold, so the server stops reading.
    let gets = 64;
    let mut pipeline = BytesMut::new();
    for id in 1..=gets {
        let mut body = BytesMut::new();
        Get { key: "big".into() }.encode(&mut body);
        pipeline.extend_from_slice(&request(Opcode::Get.as_u8(), id, &body));
    }
    let last = ping(gets + 1);
    pipeline.extend_from_slice(&last[..7]);
    s.write_all(&pipeline).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    s.write_all(&last[7..]).await.unwrap();
    let mut buf = BytesMut::new();
    for id in 1..=gets + 1 {
        let f = loop {
            if let Some(f) = frame::parse(&mut buf, 1 << 20).unwrap() {
                break f;
            }
            let n = tokio::time::timeout(Duration::from_secs(10), s.read_buf(&mut buf))
                .await
                .expect("answers keep coming")
                .unwrap();
            assert!(n > 0, "closed before answer {id}");
        };
        assert_eq!(f.header.request_id, id);
        if id <= gets {
            let got = frame::decode_response::<<Get as Command>::Reply>(f.body).unwrap();
            assert_eq!(got.unwrap().as_deref().map(<[u8]>::len), Some(value.len()));
        }
    }
    node.stop().await;
}

#[tokio::test]
async fn per_request_errors_keep_the_connection() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    let get = Opcode::Get.as_u8();
    let cases: [(&str, u8, &[u8], ErrorCode); 4] = [
        (
            "unknown opcode",
            0xee,
            b"whatever",
            ErrorCode::UnknownOpcode,
        ),
        (
            "a GET whose key length runs past the body",
            get,
            &field(256, b"k"),
            ErrorCode::BadRequest,
        ),
        (
            "trailing bytes after a valid body",
            get,
            &[0, 0, 0, 1, b'k', 9, 9],
            ErrorCode::BadRequest,
        ),
        (
            "a key over the 1024-byte limit",
            get,
            &field(5000, &[b'x'; 5000]),
            ErrorCode::TooLarge,
        ),
    ];
    for (id, (what, opcode, body, code)) in (1..).zip(cases) {
        assert_eq!(refused(&mut s, opcode, id, body).await.code, code, "{what}");
    }
    // An unknown protocol version (the answer is a version 1 frame).
    let mut b = request(0x01, 5, &[0, 0, 0, 0]);
    b[4] = 9;
    s.write_all(&b).await.unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.version, f.header.request_id, f.header.opcode),
        (frame::VERSION, 5, 0x01)
    );
    assert_eq!(error_of(&f).code, ErrorCode::UnsupportedVersion);
    // A SET condition byte (its body's last) that means nothing.
    let mut body = BytesMut::new();
    Set::new("k", "v").encode(&mut body);
    *body.last_mut().unwrap() = 7;
    let e = refused(&mut s, Opcode::Set.as_u8(), 6, &body).await;
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(
        !node.client.exists("k").await.unwrap(),
        "nothing was written"
    );
    // The same connection still works.
    s.write_all(&ping(7)).await.unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(f.header.request_id, 7);
    assert!(
        frame::decode_response::<rush_client::protocol::cmd::Pong>(f.body)
            .unwrap()
            .is_ok()
    );
    node.stop().await;
}

#[tokio::test]
async fn wrong_type_is_a_typed_error() {
    let node = TestNode::start().await;
    node.client.hset("h", [("f", "v")]).await.unwrap();
    let e = node.client.get("h").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongType));
    still_serving(&node).await;
    node.stop().await;
}

#[tokio::test]
async fn over_max_connections_gets_a_clear_error() {
    let node = TestNode::start_with(|c| c.server.max_connections = 3).await;
    // node.client holds one connection.
    let _a = raw(&node).await;
    let _b = raw(&node).await;
    let mut extra = raw(&node).await;
    let (header, e) = error_then_close(&mut extra).await;
    assert_eq!((header.request_id, header.opcode), (0, 0));
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.message.contains("max_connections"), "{e}");
    node.client.ping().await.unwrap();
    node.stop().await;
}

#[tokio::test]
async fn unknown_flag_bits_are_refused_and_nothing_runs() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    let set = Set::new("flagged", "v");
    let mut body = BytesMut::new();
    set.encode(&mut body);
    // Bit 1, the top bit, and bit 0 (a response sent to the server).
    for (id, flags) in [(1u64, 0x0002u16), (2, 0x8000), (3, frame::FLAG_RESPONSE)] {
        let mut header = Header::request(Opcode::Set.as_u8(), id);
        header.flags = flags;
        let mut b = BytesMut::new();
        frame::encode(&mut b, header, |out| out.put_slice(&body));
        s.write_all(&b).await.unwrap();
        let f = next_frame(&mut s).await.expect("an answer, not a close");
        assert_eq!(
            (f.header.request_id, f.header.opcode),
            (id, Opcode::Set.as_u8())
        );
        let e = error_of(&f);
        assert_eq!(e.code, ErrorCode::BadRequest, "flags {flags:#06x}: {e}");
    }
    assert!(
        !node.client.exists("flagged").await.unwrap(),
        "no flagged SET ran"
    );
    // The connection still serves requests with flags 0.
    assert_eq!(call(&mut s, 4, &set).await, Ok(true));
    assert!(node.client.exists("flagged").await.unwrap());
    node.stop().await;
}

#[tokio::test]
async fn connection_level_errors_carry_request_id_0_and_opcode_0() {
    let node = TestNode::start().await;
    // A length below the 12-byte header.
    let (header, e) = closing_error(&node, &[0, 0, 0, 11]).await;
    assert_eq!(
        (header.request_id, header.opcode, e.code),
        (0, 0, ErrorCode::BadRequest)
    );
    // An oversized length and no header after it: nothing to echo.
    let (header, e) = closing_error(&node, &u32::MAX.to_be_bytes()).await;
    assert_eq!(
        (header.request_id, header.opcode, e.code),
        (0, 0, ErrorCode::TooLarge)
    );
    still_serving(&node).await;
    node.stop().await;
}

#[tokio::test]
async fn a_field_over_its_limit_and_truncated_is_too_large() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    let get = Opcode::Get.as_u8();
    // A GET whose key claims 5000 bytes (over 1024) and brings 3.
    let e = refused(&mut s, get, 1, &field(5000, b"abc")).await;
    assert_eq!(e.code, ErrorCode::TooLarge);
    // Within its limit but truncated: BAD_REQUEST.
    let e = refused(&mut s, get, 2, &field(1000, b"abc")).await;
    assert_eq!(e.code, ErrorCode::BadRequest);
    // A key over its limit inside a BATCH is TOO_LARGE too, and nothing of
    // the batch runs.
    let batch = Batch {
        ops: vec![
            Set::new("{b}ok", "v").into(),
            Get {
                key: vec![b'b'; 2000].into(),
            }
            .into(),
        ],
    };
    let e = call(&mut s, 3, &batch).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::TooLarge, "{e}");
    assert!(!node.client.exists("{b}ok").await.unwrap());
    node.stop().await;
}

#[tokio::test]
async fn invalid_arguments_are_bad_requests_that_run_nothing() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    // ENVELOPE_REFUNDS pages of 1 to 10000 refunds.
    let refunds = |limit| EnvelopeRefunds {
        after: RefundCursor::START,
        limit,
    };
    for limit in [0, 10_001] {
        let what = format!("refunds limit {limit}");
        bad_request(&mut s, 100 + limit as u64, &refunds(limit), &what).await;
    }
    assert!(call(&mut s, 1, &refunds(10_000)).await.is_ok());
    // HSET and HDEL name at least one field.
    let hset = HSet {
        key: "h".into(),
        fields: vec![],
    };
    bad_request(&mut s, 2, &hset, "HSET without fields").await;
    let hdel = HDel {
        key: "h".into(),
        fields: vec![],
    };
    bad_request(&mut s, 3, &hdel, "HDEL without fields").await;
    // A BATCH has 1 to 1000 operations, none of them a BATCH.
    bad_request(&mut s, 4, &Batch::default(), "empty BATCH").await;
    let inner = Batch {
        ops: vec![Set::new("{n}b", "v").into()],
    };
    let nested = Batch {
        ops: vec![Set::new("{n}a", "v").into(), inner.into()],
    };
    bad_request(&mut s, 5, &nested, "nested BATCH").await;
    // CATALOG_SHED modes are 0 off, 1 on, 2 auto.
    let e = refused(&mut s, Opcode::CatalogShed.as_u8(), 6, &[3]).await;
    assert_eq!(e.code, ErrorCode::BadRequest, "SHED mode 3: {e}");
    for key in ["h", "{n}a", "{n}b"] {
        assert!(!node.client.exists(key).await.unwrap(), "{key} was written");
    }
    // The connection is still open and serving.
    assert!(call(&mut s, 7, &Ping::default()).await.is_ok());
    node.stop().await;
}

#[tokio::test]
async fn without_tokens_every_connection_is_admin() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    // No HELLO at all: admin requests run.
    assert_eq!(call(&mut s, 1, &Compact {}).await, Ok(()));
    // HELLO is optional, says so, and ignores any token.
    for (id, token) in [(2, None), (3, Some("anything"))] {
        let reply: HelloReply = call(&mut s, id, &hello(token)).await.unwrap();
        assert!(reply.admin, "token {token:?}");
    }
    assert_eq!(call(&mut s, 4, &Compact {}).await, Ok(()));
    node.stop().await;
}

#[tokio::test]
async fn hello_grants_and_drops_admin_rights() {
    const CLIENT: &str = "client-s3cret";
    const ADMIN: &str = "admin-s3cret";
    let secrets = tempfile::tempdir().unwrap();
    let (clients, admins) = (
        secrets.path().join("clients"),
        secrets.path().join("admins"),
    );
    std::fs::write(&clients, format!("shop:{CLIENT}\n")).unwrap();
    std::fs::write(&admins, format!("ops:{ADMIN}\n")).unwrap();
    let node = TestNode::start_with(|c| {
        c.auth.token_file = Some(clients);
        c.auth.admin_token_file = Some(admins);
    })
    .await;
    let mut s = raw(&node).await;
    let get = Get { key: "k".into() };
    let forbidden = |r: Result<(), RushError>| {
        assert_eq!(r.map_err(|e| e.code), Err(ErrorCode::Forbidden));
    };
    // Before any HELLO, nothing but HELLO.
    let e = call(&mut s, 1, &get).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    // The admin token: admin rights.
    assert!(call(&mut s, 2, &hello(Some(ADMIN))).await.unwrap().admin);
    assert_eq!(call(&mut s, 3, &Compact {}).await, Ok(()));
    // A refused HELLO changes nothing: still admin.
    let e = call(&mut s, 4, &hello(Some("guess"))).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(call(&mut s, 5, &Compact {}).await, Ok(()));
    // A second HELLO with a client token drops them; keys still work.
    assert!(!call(&mut s, 6, &hello(Some(CLIENT))).await.unwrap().admin);
    forbidden(call(&mut s, 7, &Compact {}).await);
    assert_eq!(call(&mut s, 8, &get).await, Ok(None));
    // And the admin token grants them again.
    assert!(call(&mut s, 9, &hello(Some(ADMIN))).await.unwrap().admin);
    assert_eq!(call(&mut s, 10, &Compact {}).await, Ok(()));
    node.stop().await;
}
