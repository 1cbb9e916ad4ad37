//! Any byte stream through the server's decoding path: frames are split off
//! a buffer with the size limit, and each body goes to its request decoder.
//! Nothing may panic; every frame either decodes or yields a typed error.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rush_protocol::frame;
use rush_protocol::Request;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    loop {
        match frame::parse(&mut buf, 1 << 20) {
            Ok(Some(f)) => {
                if let Ok(req) = Request::decode(f.header.opcode, f.body) {
                    // A decoded request re-encodes to a body that decodes the same.
                    let mut again = BytesMut::new();
                    req.encode_body(&mut again);
                    let back = Request::decode(req.opcode().as_u8(), again.freeze()).expect("re-encoded body decodes");
                    assert_eq!(back, req);
                    let _ = req.target();
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
});
