//! Every request body decoder: the first byte picks the opcode, the rest is
//! the body. A body that decodes must re-encode to one that decodes the same
//! and must route (or refuse to) without panicking.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use rush_protocol::Request;

fuzz_target!(|data: &[u8]| {
    let Some((&opcode, body)) = data.split_first() else {
        return;
    };
    if let Ok(req) = Request::decode(opcode, Bytes::copy_from_slice(body)) {
        let mut again = BytesMut::new();
        req.encode_body(&mut again);
        let back = Request::decode(opcode, again.freeze()).expect("re-encoded body decodes");
        assert_eq!(back, req);
        let _ = req.target();
    }
});
