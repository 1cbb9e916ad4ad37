//! Any byte stream through the RESP request parser, with small limits so
//! the fuzzer reaches them: nothing may panic, every accepted command keeps
//! within the limits, and what it accepts re-encodes to bytes that parse
//! back to the same command.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rush_protocol::resp::{self, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_args: 64,
        max_bulk: 512,
        max_inline: 256,
        max_command: 4096,
    };
    let mut buf = BytesMut::from(data);
    while let Ok(Some(args)) = resp::parse(&mut buf, &limits) {
        assert!(!args.is_empty() && args.len() <= limits.max_args);
        let mut again = BytesMut::new();
        resp::write::array(&mut again, args.len());
        for a in &args {
            assert!(a.len() <= limits.max_bulk.max(limits.max_inline));
            resp::write::bulk(&mut again, a);
        }
        let back = resp::parse(&mut again, &Limits { max_command: usize::MAX, ..limits })
            .expect("re-encoded command parses")
            .expect("and is complete");
        assert_eq!(back, args);
        assert!(again.is_empty());
    }
});
