//! The example config in deploy/ is loadable, complete and equal to the
//! built-in defaults where it says so.

use rush_daemon::config::{Config, Durability};
use std::path::Path;

fn example() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/rushd.toml");
    let c = Config::load(&path).expect("deploy/rushd.toml loads");
    c.validate().expect("and is valid");
    c
}

#[test]
fn example_config_states_the_defaults() {
    let c = example();
    let d = Config::default();
    assert_eq!(c.server.listen, d.server.listen);
    assert_eq!(c.server.http, d.server.http);
    assert_eq!(c.server.max_frame_bytes, d.server.max_frame_bytes);
    assert_eq!(c.server.max_inflight_bytes, d.server.max_inflight_bytes);
    assert_eq!(
        c.server.global_inflight_bytes,
        d.server.global_inflight_bytes
    );
    assert_eq!(c.storage.data_dir, d.storage.data_dir);
    assert_eq!(c.storage.queue_depth, d.storage.queue_depth);
    assert_eq!(c.storage.kv_durability, Durability::Sync);
    assert!(!c.debug.clock_control);
    let (e, de) = (&c.envelopes, &d.envelopes);
    assert_eq!(e.max_count, de.max_count);
    assert_eq!(e.max_total_cents, de.max_total_cents);
    assert_eq!(e.default_expiry_secs, de.default_expiry_secs);
    assert_eq!(e.max_expiry_secs, de.max_expiry_secs);
    assert_eq!(e.max_queued_grabs, de.max_queued_grabs);
    assert_eq!(e.retention_days, de.retention_days);
    assert_eq!(e.refunds_per_tick, de.refunds_per_tick);
    assert_eq!(e.cached_envelopes, de.cached_envelopes);
    assert_eq!(e.id_step, de.id_step);
}

#[test]
fn envelope_settings_are_checked() {
    let p = Path::new("test.toml");
    let c = Config::from_toml("[envelopes]\nmax_count = 0\n", p).unwrap();
    assert!(c.validate().is_err());
    let c = Config::from_toml("[envelopes]\nmax_count = 100001\n", p).unwrap();
    assert!(c.validate().is_err());
    // An envelope must be settled before retention removes its day.
    let c = Config::from_toml(
        "[envelopes]\nmax_expiry_secs = 604800\nretention_days = 7\n",
        p,
    )
    .unwrap();
    assert!(c.validate().is_err());
    let c = Config::from_toml("[envelopes]\nretention_days = 0\n", p).unwrap();
    c.validate().expect("0 keeps envelopes forever");
    let c = Config::from_toml("[envelopes]\ndefault_expiry_secs = 999999999\n", p).unwrap();
    assert!(c.validate().is_err());
    assert!(Config::from_toml("[envelopes]\nmax_grabs = 1\n", p).is_err());
}

#[test]
fn unknown_keys_and_bad_values_are_refused() {
    let p = Path::new("test.toml");
    let e = Config::from_toml("[server]\nlisen = \"x\"\n", p).unwrap_err();
    assert!(e.to_string().contains("lisen"), "{e}");
    let c = Config::from_toml("[server]\nlisten = \"not an address\"\n", p).unwrap();
    assert!(c.validate().is_err());
    let c = Config::from_toml("[server]\nmax_frame_bytes = 1\n", p).unwrap();
    assert!(c.validate().is_err());
    let c = Config::from_toml("[storage]\nkv_durability = \"sometimes\"\n", p);
    assert!(c.is_err());
}
