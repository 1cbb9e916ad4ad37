//! The redirect path's code handling: whatever a visitor puts after the `/`
//! of a short URL is checked, routed to a slot and (when it has the shape of
//! a generated code) decoded back to (slot, length, index) — which must
//! encode to the same code. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rush_protocol::cmd::code::{check_code, generated_parts, is_generated_shape, link_slot, Code};
use rush_protocol::cmd::LinkResolve;
use rush_protocol::{Command, Target, SLOTS};

fuzz_target!(|data: &[u8]| {
    let Ok(code) = std::str::from_utf8(data) else {
        return;
    };
    let slot = link_slot(code.as_bytes());
    assert!(slot < SLOTS);
    if check_code("code", code).is_err() {
        return;
    }
    assert_eq!(LinkResolve::new(code.to_string()).target().ok(), Some(Target::Slot(slot)));
    if let Some((s, len, index)) = generated_parts(code.as_bytes()) {
        assert!(is_generated_shape(code.as_bytes()));
        assert_eq!(s, slot, "a generated code's slot is the one it routes to");
        assert_eq!(len as usize, code.len());
        assert_eq!(Code::generated(s, len, index).as_str(), code);
    }
});
