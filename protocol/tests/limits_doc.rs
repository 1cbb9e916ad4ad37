//! The input limits documented in README.md and PROTOCOL.md are the ones the
//! code enforces (protocol/src/limits.rs).

use rush_protocol::limits::*;

fn mib(n: usize) -> String {
    format!("{} MiB", n >> 20)
}

/// The row of a markdown table whose first cell starts with `label`.
fn row<'d>(doc: &'d str, label: &str) -> &'d str {
    doc.lines()
        .find(|l| l.starts_with(&format!("| {label}")))
        .unwrap_or_else(|| panic!("no limits row {label:?}"))
}

fn check(doc: &str, name: &str, rows: &[(&str, String)]) {
    for (label, expected) in rows {
        let r = row(doc, label);
        assert!(
            r.contains(expected.as_str()),
            "{name}: row {label:?} should say {expected:?}: {r}"
        );
    }
}

#[test]
fn readme_limits_match_the_code() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    check(
        &readme,
        "README.md",
        &[
            ("frame", format!("{} (", mib(DEFAULT_MAX_FRAME))),
            ("frame", format!("at most {}", mib(MAX_FRAME_CEILING))),
            ("key", format!("{MAX_KEY} bytes")),
            ("value, hash field value", mib(MAX_VALUE)),
            ("fields per hash", MAX_HASH_FIELDS.to_string()),
            ("operations per BATCH", MAX_BATCH_OPS.to_string()),
            ("URL (link target, app link)", format!("{MAX_URL} bytes")),
            ("code or alias", format!("{MAX_CODE} bytes")),
            ("URLs per batch shorten", MAX_SHORTEN_BATCH.to_string()),
            ("items per order", MAX_ORDER_ITEMS.to_string()),
            ("order, item id", format!("{MAX_ID} bytes")),
            ("records per owner", MAX_RECORDS_PER_OWNER.to_string()),
            ("attributes per record", MAX_ATTRIBUTES.to_string()),
            ("envelope shares", MAX_ENVELOPE_COUNT.to_string()),
            (
                "envelope user, sender",
                format!("{MAX_ENVELOPE_USER} bytes"),
            ),
        ],
    );
}

#[test]
fn protocol_limits_match_the_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md")).unwrap();
    check(
        &doc,
        "PROTOCOL.md",
        &[
            ("frame", format!("{} default", mib(DEFAULT_MAX_FRAME))),
            ("key", format!("{MAX_KEY} bytes")),
            ("string value / hash field value", mib(MAX_VALUE)),
            ("hash field name", format!("{MAX_FIELD} bytes")),
            ("fields per HSET/HDEL", MAX_FIELDS_PER_REQUEST.to_string()),
            ("fields per hash", MAX_HASH_FIELDS.to_string()),
            ("operations per BATCH", MAX_BATCH_OPS.to_string()),
            ("text", format!("{MAX_TEXT} bytes")),
            ("link target / app URL", format!("{MAX_URL} bytes")),
            ("code or alias", format!("{MAX_CODE} bytes")),
            ("URLs per LINK_SHORTEN_BATCH", MAX_SHORTEN_BATCH.to_string()),
            ("attributes per record", MAX_ATTRIBUTES.to_string()),
            ("records per owner", MAX_RECORDS_PER_OWNER.to_string()),
            ("owners per CATALOG_WARM", MAX_WARM_OWNERS.to_string()),
            ("envelope shares", MAX_ENVELOPE_COUNT.to_string()),
            (
                "envelope user or sender",
                format!("{MAX_ENVELOPE_USER} bytes"),
            ),
        ],
    );
}
