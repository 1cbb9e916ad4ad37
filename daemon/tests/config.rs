//! The example config in deploy/ is loadable, complete and equal to the
//! built-in defaults where it says so.

mod common;

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
    assert_eq!(c.server.max_connections, d.server.max_connections);
    assert_eq!(c.server.listen_backlog, d.server.listen_backlog);
    assert_eq!(
        c.server.transparent_huge_pages,
        d.server.transparent_huge_pages
    );
    assert_eq!(
        c.server.yield_before_sleep_pct,
        d.server.yield_before_sleep_pct
    );
    assert_eq!(c.storage.data_dir, d.storage.data_dir);
    assert_eq!(c.storage.queue_depth, d.storage.queue_depth);
    assert_eq!(c.storage.row_cache_mb, d.storage.row_cache_mb);
    assert_eq!(c.storage.memtable, d.storage.memtable);
    assert_eq!(c.storage.commit, d.storage.commit);
    assert_eq!(c.storage.write_back_mb, d.storage.write_back_mb);
    assert_eq!(c.storage.kv_durability, Durability::Sync);
    assert!(!c.debug.clock_control);
    assert_eq!(c.limits.default_time_zone, d.limits.default_time_zone);
    assert_eq!(c.limits.order_retention_secs, d.limits.order_retention_secs);
    let (cat, dcat) = (&c.catalog, &d.catalog);
    assert_eq!(cat.bloom_expected_items, dcat.bloom_expected_items);
    assert_eq!(cat.bloom_fp_rate, dcat.bloom_fp_rate);
    assert_eq!(
        cat.bloom_rebuild_stale_fraction,
        dcat.bloom_rebuild_stale_fraction
    );
    assert_eq!(cat.bloom_rebuild_min_stale, dcat.bloom_rebuild_min_stale);
    assert_eq!(
        cat.bloom_rebuild_keys_per_tick,
        dcat.bloom_rebuild_keys_per_tick
    );
    assert_eq!(cat.cache_mb, dcat.cache_mb);
    assert_eq!(cat.cache_ttl_secs, dcat.cache_ttl_secs);
    assert_eq!(cat.cache_ttl_jitter, dcat.cache_ttl_jitter);
    assert_eq!(cat.shed, dcat.shed);
    assert_eq!(cat.shed_queue_depth, dcat.shed_queue_depth);
    assert_eq!(cat.max_records_per_owner, dcat.max_records_per_owner);
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
    let (k, dk) = (&c.cluster, &d.cluster);
    assert_eq!(k.map_file, None, "no map: a lone node");
    assert_eq!(k.advertise, None);
    assert_eq!(k.peer_timeout_ms, dk.peer_timeout_ms);
    assert_eq!(k.migrate_chunk_keys, dk.migrate_chunk_keys);
    assert_eq!(k.migrate_chunk_bytes, dk.migrate_chunk_bytes);
    assert_eq!(c.node.id, None);
    assert_eq!(c.debug.crash_point, None);
    let (m, dm) = (&c.memory, &d.memory);
    assert_eq!(
        m.budget_mb, 0,
        "no budget by default: each part its own setting"
    );
    assert_eq!(m.block_cache_pct, dm.block_cache_pct);
    assert_eq!(m.row_cache_pct, dm.row_cache_pct);
    assert_eq!(m.catalog_cache_pct, dm.catalog_cache_pct);
    assert_eq!(m.memtables_pct, dm.memtables_pct);
    assert_eq!(m.write_back_pct, dm.write_back_pct);
    assert!(c
        .named_sizes
        .contains(&"storage.block_cache_mb".to_string()));
}

#[test]
fn a_memory_budget_sizes_the_caches_and_buffers_by_its_shares() {
    let p = Path::new("test.toml");
    let mut c = Config::from_toml(
        "[storage]\nshards = 4\n[memory]\nbudget_mb = 2048\nrow_cache_pct = 25\n",
        p,
    )
    .unwrap();
    c.validate().unwrap();
    c.apply_memory_budget();
    assert_eq!(c.storage.block_cache_mb, 614, "30 % of 2048");
    assert_eq!(c.storage.row_cache_mb, 512, "25 % as set");
    assert_eq!(c.catalog.cache_mb, 307);
    // 10 % over 4 shards' two memtables each; 10 % over 3 run buffers.
    assert_eq!(c.storage.write_buffer_mb, 204 / 8);
    assert_eq!(c.storage.write_back_mb, 204 / 3);
    // Applying it again changes nothing.
    let once = c.storage.write_buffer_mb;
    c.apply_memory_budget();
    assert_eq!(c.storage.write_buffer_mb, once);

    // No budget: the parts' own settings stand.
    let mut c = Config::from_toml("[storage]\nblock_cache_mb = 99\n", p).unwrap();
    c.validate().unwrap();
    c.apply_memory_budget();
    assert_eq!(c.storage.block_cache_mb, 99);
}

#[test]
fn a_memory_budget_is_checked() {
    let p = Path::new("test.toml");
    let refused = |toml: &str, says: &str| {
        let c = Config::from_toml(toml, p).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(says), "{toml}: {e}");
    };
    // A part named beside the budget would be silently overridden.
    refused(
        "[memory]\nbudget_mb = 1024\n[catalog]\ncache_mb = 64\n",
        "catalog.cache_mb is set by memory.budget_mb",
    );
    refused(
        "[storage]\nwrite_buffer_mb = 8\n[memory]\nbudget_mb = 1024\n",
        "storage.write_buffer_mb is set by memory.budget_mb",
    );
    refused(
        "[memory]\nbudget_mb = 1024\nblock_cache_pct = 60\nrow_cache_pct = 30\n",
        "add up to 125 %",
    );
    refused(
        "[memory]\nrow_cache_pct = 0\n",
        "memory.row_cache_pct must be within 1..=100",
    );
    refused(
        "[memory]\nbudget_mb = 32\n",
        "below the smallest budget, 64 MiB",
    );
    refused(
        "[storage]\nshards = 16\n[memory]\nbudget_mb = 512\n",
        "16 shards' memtables need at least",
    );
    // A flag sets the budget after the file: the check is the same.
    let mut c = Config::from_toml("[storage]\nrow_cache_mb = 8\n", p).unwrap();
    c.memory.budget_mb = 1024;
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("storage.row_cache_mb is set by memory.budget_mb"),
        "{e}"
    );
    // Shares alone, without a budget, are fine (they wait for one), and
    // are checked all the same.
    refused("[memory]\nrow_cache_pct = 40\n", "add up to 105 %");
    Config::from_toml("[memory]\nrow_cache_pct = 20\n", p)
        .unwrap()
        .validate()
        .unwrap();
}

#[test]
fn cluster_section_is_checked() {
    let p = Path::new("test.toml");
    let ok = Config::from_toml(
        "[node]\nid = \"rush-0\"\n[cluster]\nmap_file = \"/etc/rush/cluster.toml\"\nadvertise = \"rush-0.rush:7379\"\n",
        p,
    )
    .unwrap();
    ok.validate().unwrap();
    assert_eq!(ok.cluster.advertise.as_deref(), Some("rush-0.rush:7379"));
    for bad in [
        "[cluster]\nadvertise = \"no-port\"\n",
        "[cluster]\nadvertise = \":7379\"\n",
        "[cluster]\nmigrate_chunk_keys = 0\n",
        "[cluster]\nmigrate_chunk_bytes = 100000000\n",
        "[cluster]\npeer_timeout_ms = 0\n",
        "[node]\nid = \"two words\"\n",
    ] {
        let c = Config::from_toml(bad, p).unwrap();
        assert!(c.validate().is_err(), "{bad}");
    }
    assert!(Config::from_toml("[cluster]\nmap = \"x\"\n", p).is_err());
}

#[test]
fn example_limit_policies_load() {
    let defs = example().limits.policy_defs().unwrap();
    let names: Vec<&str> = defs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["coupons", "flash-sale"]);
    let seed = &defs[1];
    assert!(!seed.relaxed);
    let rules: Vec<String> = seed
        .rules
        .iter()
        .map(|r| format!("{} {} {} {}", r.name, r.scope, r.max, r.window))
        .collect();
    assert_eq!(
        rules,
        vec![
            "item item 1 day:Asia/Shanghai",
            "total total 5 day:Asia/Shanghai"
        ]
    );
    assert!(defs[0].relaxed);
    assert_eq!(defs[0].rules[0].window.to_string(), "sliding:3600/60");
}

#[test]
fn bad_limit_policies_are_refused() {
    let p = Path::new("test.toml");
    for bad in [
        "[limits]\ndefault_time_zone = \"Nowhere/Land\"\n",
        "[limits.policies.p]\nwindow = \"day:Nowhere/Land\"\ntotal_max = 1\n",
        "[limits.policies.p]\nwindow = \"weekly\"\ntotal_max = 1\n",
        "[limits.policies.p]\ntotal_max = 1\n",
        "[limits.policies.p]\nwindow = \"day\"\n",
        "[limits.policies.\"bad name\"]\nwindow = \"day\"\ntotal_max = 1\n",
        "[limits.policies.p]\nrules = []\n",
    ] {
        let c = Config::from_toml(bad, p).unwrap();
        assert!(c.validate().is_err(), "{bad}");
    }
    let e = Config::from_toml("[limits.policies.p]\nwindw = \"day\"\n", p).unwrap_err();
    assert!(e.to_string().contains("windw"), "{e}");
}

#[test]
fn catalog_section_is_checked() {
    let p = Path::new("test.toml");
    let c = Config::from_toml("[catalog]\nshed = \"auto\"\nbloom_fp_rate = 0.001\n", p).unwrap();
    c.validate().unwrap();
    assert_eq!(c.catalog.shed, rush_daemon::catalog::config::Shed::Auto);
    assert!(Config::from_toml("[catalog]\nshed = \"sometimes\"\n", p).is_err());
    assert!(Config::from_toml("[catalog]\nbloom_size = 1\n", p).is_err());
    for bad in [
        "bloom_fp_rate = 0.0",
        "bloom_fp_rate = 0.9",
        "bloom_expected_items = 0",
        "cache_mb = 0",
        "cache_ttl_jitter = 1.0",
        "max_records_per_owner = 5000",
        "bloom_rebuild_stale_fraction = 0.0",
    ] {
        let c = Config::from_toml(&format!("[catalog]\n{bad}\n"), p).unwrap();
        assert!(c.validate().is_err(), "{bad} was accepted");
    }
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
    let c = Config::from_toml("[server]\nlisten_backlog = 0\n", p).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("listen_backlog"), "{e}");
    let c = Config::from_toml("[server]\nyield_before_sleep_pct = 101\n", p).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("yield_before_sleep_pct must be at most 100"),
        "{e}"
    );
    let c = Config::from_toml("[server]\nyield_before_sleep_pct = 300\n", p);
    assert!(c.is_err(), "not a percent that fits");
    let c = Config::from_toml("[storage]\nkv_durability = \"sometimes\"\n", p);
    assert!(c.is_err());
    let e = Config::from_toml("[storage]\ncommit = \"later\"\n", p).unwrap_err();
    assert!(e.to_string().contains("later"), "{e}");
    let c = Config::from_toml("[storage]\nwrite_back_mb = 0\n", p).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("write_back_mb"), "{e}");
    // Without a log there is nothing to write back.
    let c = Config::from_toml("[storage]\ncommit = \"direct\"\nwrite_back_mb = 0\n", p);
    c.unwrap().validate().unwrap();
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

/// `THP_enabled` of a running rushd, from /proc (Linux 5.0+).
fn thp_enabled(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled in /proc/{pid}/status:\n{status}"));
    line.trim() == "1"
}

/// rushd turns transparent huge pages off for itself unless the config
/// lets them be (the process flag the kernel checks at each fault).
#[test]
fn transparent_huge_pages_follow_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let mut off = common::Spawned::start(&dir.path().join("off"), &[]);
    assert!(!thp_enabled(off.child.id()), "off by default");
    off.kill9();
    let conf = dir.path().join("thp.toml");
    std::fs::write(&conf, "[server]\ntransparent_huge_pages = true\n").unwrap();
    let conf = conf.display().to_string();
    let mut on = common::Spawned::start(&dir.path().join("on"), &["--config", &conf]);
    assert!(
        thp_enabled(on.child.id()),
        "left on when the config says so"
    );
    on.kill9();
}
