//! `rush shorten`, `rush resolve` and `rush link …` against an in-process node.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shorten_resolve_info_update_qr_delete() {
    let dir = tempfile::tempdir().unwrap();
    let node = common::node_with(|c| {
        c.links.base_url = "https://s.example/".into();
        c.links.app_schemes = vec!["myapp".into()];
    })
    .await;

    let out = node
        .run("shorten https://example.com/cli?q=1 --ttl 100d --len 5 --ios myapp://x")
        .await;
    out.exits(0);
    let short = out.stdout.trim().to_string();
    let code = short
        .strip_prefix("https://s.example/")
        .expect("a short URL")
        .to_string();
    assert_eq!(code.len(), 5);

    let out = node.run(&format!("resolve {code}")).await;
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, "https://example.com/cli?q=1")
    );

    let out = node.run(&format!("link info {code}")).await;
    out.exits(0);
    for line in [
        "target: https://example.com/cli?q=1",
        "ios: myapp://x",
        "redirect: 302",
        "ttl: 100d",
        "visits: 1",
    ] {
        assert!(
            out.stdout.lines().any(|l| l == line),
            "{line:?} not in\n{}",
            out.stdout
        );
    }
    out.stdout_has("\nday ");
    // Dates, not milliseconds: RFC 3339 in UTC.
    let created = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("created: "))
        .unwrap();
    assert!(is_rfc3339(created), "{created}");

    // The same record for scripts.
    let j = node.json(&format!("link info {code}")).await;
    assert_eq!(j["code"], code.as_str());
    assert_eq!(j["short_url"], short.as_str());
    assert_eq!(j["target"], "https://example.com/cli?q=1");
    assert_eq!(j["ios"], "myapp://x");
    assert_eq!(j["android"], serde_json::Value::Null);
    assert_eq!(j["redirect"], 302);
    assert_eq!(j["ttl_ms"], 100 * 86_400_000u64);
    assert_eq!(j["visits"], 1);
    let created_ms = j["created_at_ms"].as_u64().unwrap();
    assert!(created_ms > 1_700_000_000_000, "{j}");
    assert_eq!(
        j["created_at"],
        rush_client::calendar::timestamp_exact(created_ms).as_str()
    );
    assert_eq!(created, rush_client::calendar::timestamp(created_ms));
    assert_eq!(j["daily"][0]["visits"], 1);
    let r = node.json(&format!("resolve {code}")).await;
    assert_eq!(r["target"], "https://example.com/cli?q=1");
    let s = node.json("shorten https://example.com/j --reuse").await;
    assert_eq!(s["reused"], false);
    let again = node.json("shorten https://example.com/j --reuse").await;
    assert_eq!(
        (again["reused"].clone(), again["code"].clone()),
        (true.into(), s["code"].clone())
    );

    node.run(&format!(
        "link update {code} --url https://example.com/v2 --no-ios --permanent"
    ))
    .await
    .exits(0);
    let out = node.run(&format!("resolve {code}")).await;
    assert_eq!(out.stdout.trim(), "https://example.com/v2");
    let out = node.run(&format!("link info {code}")).await;
    assert!(
        out.stdout.contains("redirect: 301") && !out.stdout.contains("ios:"),
        "{}",
        out.stdout
    );

    // QR code: PNG decodes back to the short URL; *.svg writes SVG.
    // (The path as one argument: a temporary directory may hold a space.)
    let qr = |path: std::path::PathBuf, extra: &'static [&'static str]| {
        let (node, code) = (&node, &code);
        async move {
            let mut args = vec!["link", "qr", code, "-o", path.to_str().unwrap()];
            args.extend_from_slice(extra);
            node.rush(&args).await.exits(0);
        }
    };
    let png = dir.path().join("out.png");
    qr(png.clone(), &[]).await;
    let img = image::open(&png).unwrap().to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1);
    assert_eq!(grids[0].decode().unwrap().1, short);
    let svg = dir.path().join("out.svg");
    qr(svg.clone(), &[]).await;
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let forced = dir.path().join("qr.img");
    qr(forced.clone(), &["--svg"]).await;
    assert!(std::fs::read_to_string(&forced).unwrap().contains("<svg"));

    // Aliases, conflicts and bad input are errors with a clear message.
    let out = node
        .run("shorten https://example.com/sale --alias sale --ttl none")
        .await;
    assert_eq!((out.code, out.stdout.trim()), (0, "https://s.example/sale"));
    node.run("shorten https://example.com/other --alias sale")
        .await
        .exits(1)
        .stderr_has("CONFLICT");
    // An alias names a new link; --reuse returns an old one: not both.
    node.run("shorten https://example.com/sale --alias sale --reuse")
        .await
        .exits(64)
        .stderr_has("--reuse");
    node.run("shorten javascript:alert(1)")
        .await
        .exits(1)
        .stderr_has("BAD_REQUEST");

    let delete = format!("link delete {code}");
    let out = node.run(&delete).await;
    assert_eq!((out.code, out.stdout.trim()), (0, "deleted"));
    let out = node.run(&delete).await;
    assert_eq!((out.code, out.stdout.trim()), (0, "(not found)"));
    node.run(&format!("resolve {code}"))
        .await
        .exits(1)
        .stderr_has("NOT_FOUND");
    node.stop().await;
}

/// `2026-11-29T08:00:00Z`
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 20
        && b[4] == b'-'
        && b[10] == b'T'
        && s.ends_with('Z')
        && s[..4].parse::<u16>().is_ok_and(|y| y >= 2020)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_passthrough_is_a_switch_on_shorten_and_update() {
    let node = common::node_with(|c| c.links.base_url = "https://s.example/".into()).await;
    let code_of = |short: &str| {
        short
            .trim()
            .strip_prefix("https://s.example/")
            .expect("a short URL")
            .to_string()
    };
    let passthrough = |code: String| {
        let node = &node;
        async move {
            let out = node.run(&format!("link info {code}")).await;
            out.exits(0);
            let text = out
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("query_passthrough: "))
                .unwrap_or_else(|| panic!("no query_passthrough line in\n{}", out.stdout))
                .to_string();
            let j = node.json(&format!("link info {code}")).await;
            (text, j["query_passthrough"].clone())
        }
    };
    let on = || ("on".to_string(), serde_json::Value::Bool(true));
    let off = || ("off".to_string(), serde_json::Value::Bool(false));

    // On unless asked.
    let out = node.run("shorten https://example.com/on").await;
    let default = code_of(&out.exits(0).stdout);
    assert_eq!(passthrough(default.clone()).await, on());

    let out = node
        .run("shorten https://example.com/off --no-query-passthrough")
        .await;
    let dropping = code_of(&out.exits(0).stdout);
    assert_eq!(passthrough(dropping.clone()).await, off());
    let r = node.json(&format!("resolve {dropping}")).await;
    assert_eq!(r["query_passthrough"], false);

    // Update turns it either way, and an unrelated update keeps it.
    let update = |code: String, flag: &'static str| {
        let node = &node;
        async move {
            node.run(&format!("link update {code} {flag}"))
                .await
                .exits(0);
        }
    };
    update(dropping.clone(), "--query-passthrough").await;
    assert_eq!(passthrough(dropping.clone()).await, on());
    update(default.clone(), "--no-query-passthrough").await;
    assert_eq!(passthrough(default.clone()).await, off());
    update(default.clone(), "--permanent").await;
    assert_eq!(passthrough(default.clone()).await, off());

    // Both at once is refused before anything is sent.
    let out = node
        .run(&format!(
            "link update {default} --query-passthrough --no-query-passthrough"
        ))
        .await;
    assert_ne!(out.code, 0);
    out.stderr_has("cannot be used with");
    assert_eq!(passthrough(default).await, off());
}
