//! `rush envelope …` against an in-process node: output and exit codes.

mod common;

use rush_client::Client;
use std::time::Duration;

struct Node {
    node: common::Node,
    client: Client,
}

async fn start() -> Node {
    let node = common::node().await;
    let client = Client::connect(&node.addr()).await.unwrap();
    Node { node, client }
}

/// Run `rush --addr ADDR args…`: (exit code, stdout, stderr).
async fn rush(node: &Node, args: &[&str]) -> (i32, String, String) {
    node.node.rush(args).await.parts()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_grab_info_refunds_audit() {
    let node = start().await;
    let (code, out, err) = rush(
        &node,
        &[
            "envelope",
            "create",
            "--sender",
            "alice",
            "--total",
            "1001",
            "--count",
            "2",
            "--mode",
            "fixed",
            "--expires",
            "1h",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();
    id.parse::<u64>().expect("the id, in decimal");

    let (code, out, _) = rush(&node, &["envelope", "grab", &id, "bob"]).await;
    assert_eq!((code, out.trim()), (0, "501"));
    // A repeat prints the same amount and still succeeds.
    let (code, out, err) = rush(&node, &["envelope", "grab", &id, "bob"]).await;
    assert_eq!((code, out.trim()), (0, "501"));
    assert!(err.contains("already grabbed"));
    let (code, out, _) = rush(&node, &["envelope", "grab", &id, "carol"]).await;
    assert_eq!((code, out.trim()), (0, "500"));
    // Empty: exit 2.
    let (code, _, err) = rush(&node, &["envelope", "grab", &id, "dave"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("EMPTY"), "{err}");
    // Unknown envelope: an error, exit 1.
    let (code, _, err) = rush(&node, &["envelope", "grab", "16384", "dave"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("NOT_FOUND"), "{err}");

    let (code, out, _) = rush(&node, &["envelope", "info", &id]).await;
    assert_eq!(code, 0);
    for line in [
        "state: empty",
        "total_cents: 1001",
        "remaining_cents: 0",
        "grabbed: 2",
        "mode: fixed",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    assert!(out.contains("grab: bob 501 ") && out.contains("grab: carol 500 "));
    // Dates, as `link info` shows them, not raw milliseconds.
    for label in ["created: ", "expires: ", "grab: bob 501 "] {
        let value = out
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("{label} in {out}"));
        assert!(
            value.len() == 20 && value.ends_with('Z') && value.as_bytes()[10] == b'T',
            "{label}{value}"
        );
    }
    assert!(!out.contains("_ms:"), "{out}");
    let j = common::json(&node.node.addr(), &["envelope", "info", &id]).await;
    assert_eq!(j["state"], "empty");
    assert_eq!(j["total_cents"], 1001);
    assert_eq!(j["grabs"].as_array().unwrap().len(), 2);
    let created = j["created_at_ms"].as_u64().unwrap();
    assert_eq!(j["expires_at_ms"], created + 3_600_000);
    assert_eq!(
        j["created_at"],
        rush_client::calendar::timestamp_exact(created).as_str()
    );
    let (code, out, _) = rush(&node, &["--json", "envelope", "grab", &id, "erin"]).await;
    assert_eq!(code, 2);
    let denied: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (denied["granted"].clone(), denied["denied"].clone()),
        (false.into(), "EMPTY".into())
    );

    // Bad input, nothing created: malformed numbers are usage errors (64),
    // numbers the node refuses are errors (1).
    for (total, count, want) in [
        ("-5", "2", 64),
        ("1.5", "2", 64),
        ("100", "x", 64),
        ("100", "0", 1),
        ("1", "2", 1),
    ] {
        let args = [
            "envelope", "create", "--sender", "s", "--total", total, "--count", count,
        ];
        let (code, _, err) = rush(&node, &args).await;
        assert_eq!(code, want, "{total} {count}: {err}");
    }

    // Expiry with money left: the refund stream, then acknowledge it.
    let (_, out, _) = rush(
        &node,
        &[
            "envelope",
            "create",
            "--sender",
            "erin",
            "--total",
            "300",
            "--count",
            "3",
            "--expires",
            "1h",
        ],
    )
    .await;
    let open = out.trim().to_string();
    rush(&node, &["envelope", "grab", &open, "x"]).await;
    node.client
        .clock_advance(Duration::from_secs(7200))
        .await
        .unwrap();
    let (code, out, _) = rush(&node, &["envelope", "refunds"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("envelope {open} sender erin cents ")),
        "{out}"
    );
    assert!(out.lines().last().unwrap().starts_with("next "));
    let (code, out, _) = rush(&node, &["envelope", "refunds", "--ack"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("acknowledged 1"), "{out}");
    let (_, out, _) = rush(&node, &["envelope", "refunds"]).await;
    assert_eq!(out.lines().count(), 1, "only the next cursor: {out}");
    let (code, _, err) = rush(&node, &["envelope", "refunds", "--from", "nonsense"]).await;
    assert_eq!(code, 64, "{err}");

    let (code, out, _) = rush(&node, &["envelope", "audit"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("envelopes 2 ") && out.contains("problems 0"),
        "{out}"
    );

    // Books that are off: the audit says so and exits 3.
    let id: u64 = id.parse().unwrap();
    let storage = node.node.running().storage().clone();
    let (slot, day) = (
        rush_client::protocol::cmd::envelope_slot(id),
        rush_client::protocol::cmd::envelope_day(id),
    );
    let shard = rush_daemon::shard::route::shard_of_slot(slot, storage.shards());
    let key = rush_daemon::storage::keys::envelope::record(slot, day, id);
    let raw = storage.get(shard, &key).unwrap().unwrap().to_vec();
    let mut rec = rush_daemon::envelopes::record::EnvelopeRecord::decode(&raw).unwrap();
    rec.total += 1; // a cent appears from nowhere
    let mut batch = rush_daemon::storage::WriteBatch::default();
    batch.put_cf(storage.cf(shard), &key, rec.encode());
    storage.write(batch, true).unwrap();
    let (code, out, _) = rush(&node, &["envelope", "audit"]).await;
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("problem: envelope"), "{out}");
    node.node.stop().await;
}
