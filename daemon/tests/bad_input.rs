//! Whatever bytes a client sends, it gets a typed error or a clean close of
//! its own connection, and the daemon keeps serving everyone else.

mod common;

use bytes::{BufMut, BytesMut};
use common::TestNode;
use rush_client::protocol::frame::{self, Frame, Header};
use rush_client::protocol::{ErrorCode, RushError};
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

fn error_of(f: &Frame) -> RushError {
    frame::decode_response::<()>(f.body.clone())
        .unwrap()
        .unwrap_err()
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
    let mut body = BytesMut::new();
    body.put_u32(2);
    body.put_slice(b"ok");
    request(0x01, id, &body)
}

#[tokio::test]
async fn oversized_length_prefix_is_refused_before_reading() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    // A 4 GiB frame announced with a full header, and no body ever sent.
    let mut b = BytesMut::new();
    b.put_u32(u32::MAX);
    b.put_slice(&[1, 0x11, 0, 0]);
    b.put_u64(77);
    s.write_all(&b).await.unwrap();
    let f = next_frame(&mut s).await.expect("an error answer");
    assert_eq!(f.header.request_id, 77, "the answer carries the request id");
    assert_eq!(error_of(&f).code, ErrorCode::TooLarge);
    assert!(
        next_frame(&mut s).await.is_none(),
        "then the connection is closed"
    );
    still_serving(&node).await;
    node.stop().await;
}

#[tokio::test]
async fn garbage_bytes_close_only_that_connection() {
    let node = TestNode::start().await;
    // Text where a length should be: "GET " is a 1.2 GB length.
    let mut s = raw(&node).await;
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let f = next_frame(&mut s).await.expect("an error answer");
    assert_eq!(error_of(&f).code, ErrorCode::TooLarge);
    assert!(next_frame(&mut s).await.is_none());
    // A length too short to hold a header.
    let mut s = raw(&node).await;
    s.write_all(&[0, 0, 0, 3, 0xde, 0xad, 0xbe]).await.unwrap();
    let f = next_frame(&mut s).await.expect("an error answer");
    assert_eq!(error_of(&f).code, ErrorCode::BadRequest);
    assert!(next_frame(&mut s).await.is_none());
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

#[tokio::test]
async fn per_request_errors_keep_the_connection() {
    let node = TestNode::start().await;
    let mut s = raw(&node).await;
    // Unknown opcode.
    s.write_all(&request(0xee, 1, b"whatever")).await.unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.request_id, error_of(&f).code),
        (1, ErrorCode::UnknownOpcode)
    );
    // A GET whose key length runs past the body.
    s.write_all(&request(0x10, 2, &[0, 0, 1, 0, b'k']))
        .await
        .unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.request_id, error_of(&f).code),
        (2, ErrorCode::BadRequest)
    );
    // Trailing bytes after a valid body.
    s.write_all(&request(0x10, 3, &[0, 0, 0, 1, b'k', 9, 9]))
        .await
        .unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.request_id, error_of(&f).code),
        (3, ErrorCode::BadRequest)
    );
    // A key over the 1024-byte limit.
    let mut body = BytesMut::new();
    body.put_u32(5000);
    body.put_slice(&[b'x'; 5000]);
    s.write_all(&request(0x10, 4, &body)).await.unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.request_id, error_of(&f).code),
        (4, ErrorCode::TooLarge)
    );
    // An unknown protocol version.
    let mut b = request(0x01, 5, &[0, 0, 0, 0]);
    b[4] = 9;
    s.write_all(&b).await.unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.request_id, error_of(&f).code),
        (5, ErrorCode::UnsupportedVersion)
    );
    // A SET condition byte that means nothing.
    let mut body = BytesMut::new();
    body.put_u32(1);
    body.put_slice(b"k");
    body.put_u32(1);
    body.put_slice(b"v");
    body.put_u64(0);
    body.put_u8(7);
    s.write_all(&request(0x11, 6, &body)).await.unwrap();
    let f = next_frame(&mut s).await.unwrap();
    assert_eq!(
        (f.header.request_id, error_of(&f).code),
        (6, ErrorCode::BadRequest)
    );
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
    let f = next_frame(&mut extra)
        .await
        .expect("an error before the close");
    let e = error_of(&f);
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.message.contains("max_connections"), "{e}");
    assert!(next_frame(&mut extra).await.is_none());
    node.client.ping().await.unwrap();
    node.stop().await;
}
