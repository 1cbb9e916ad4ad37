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
    let (l, dl) = (&c.links, &d.links);
    assert_eq!(l.base_url, dl.base_url);
    assert_eq!(l.redirect_listen, "", "redirects are off by default");
    assert_eq!(l.redirect_listen, dl.redirect_listen);
    assert_eq!(l.default_length, dl.default_length);
    assert_eq!(l.default_ttl_secs, dl.default_ttl_secs);
    assert_eq!(l.slide_interval_secs, dl.slide_interval_secs);
    for len in 5..=8 {
        assert_eq!(l.segment_step(len), dl.segment_step(len));
    }
    assert_eq!(l.app_schemes, dl.app_schemes);
}

#[test]
fn links_section_is_checked() {
    let p = Path::new("test.toml");
    let ok = Config::from_toml(
        "[links]\nredirect_listen = \"127.0.0.1:0\"\napp_schemes = [\"myapp\"]\n",
        p,
    )
    .unwrap();
    ok.validate().unwrap();
    for bad in [
        "[links]\nbase_url = \"s.example/\"\n",
        "[links]\nbase_url = \"https://s.example\"\n",
        "[links]\ndefault_length = 9\n",
        "[links]\nsegment_step_5 = 0\n",
        "[links]\nredirect_listen = \"nowhere\"\n",
        "[links]\napp_schemes = [\"javascript\"]\n",
        "[links]\napp_schemes = [\"not a scheme\"]\n",
    ] {
        let c = Config::from_toml(bad, p).unwrap();
        assert!(c.validate().is_err(), "{bad}");
    }
    assert!(Config::from_toml("[links]\nbase = 1\n", p).is_err());
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
