//! The client's decoders: reply bodies of every opcode and error bodies, as a
//! hostile or buggy server might send them.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use rush_protocol::{Opcode, Reply, RushError, Wire};

fuzz_target!(|data: &[u8]| {
    let Some((&opcode, body)) = data.split_first() else {
        return;
    };
    let body = Bytes::copy_from_slice(body);
    if let Some(op) = Opcode::from_u8(opcode) {
        if let Ok(reply) = Reply::decode(op, body.clone()) {
            let mut again = BytesMut::new();
            reply.encode_body(&mut again);
            assert_eq!(Reply::decode(op, again.freeze()).expect("re-encoded reply decodes"), reply);
        }
    }
    let _ = RushError::decode_body(body);
});
