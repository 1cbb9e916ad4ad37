//! `rush shorten`, `rush resolve` and `rush link …` against an in-process node.

mod common;

use common::rush;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shorten_resolve_info_update_qr_delete() {
    let dir = tempfile::tempdir().unwrap();
    let node = common::node_with(|c| {
        c.links.base_url = "https://s.example/".into();
        c.links.app_schemes = vec!["myapp".into()];
    })
    .await;
    let addr = node.addr();

    let out = rush(
        &addr,
        &[
            "shorten",
            "https://example.com/cli?q=1",
            "--ttl",
            "100d",
            "--len",
            "5",
            "--ios",
            "myapp://x",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let short = out.stdout.trim().to_string();
    let code = short
        .strip_prefix("https://s.example/")
        .expect("a short URL")
        .to_string();
    assert_eq!(code.len(), 5);

    let out = rush(&addr, &["resolve", &code]).await;
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, "https://example.com/cli?q=1")
    );

    let out = rush(&addr, &["link", "info", &code]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
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
    assert!(out.stdout.contains("\nday "), "{}", out.stdout);

    let out = rush(
        &addr,
        &[
            "link",
            "update",
            &code,
            "--url",
            "https://example.com/v2",
            "--no-ios",
            "--permanent",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = rush(&addr, &["resolve", &code]).await;
    assert_eq!(out.stdout.trim(), "https://example.com/v2");
    let out = rush(&addr, &["link", "info", &code]).await;
    assert!(
        out.stdout.contains("redirect: 301") && !out.stdout.contains("ios:"),
        "{}",
        out.stdout
    );

    // QR code: PNG decodes back to the short URL; *.svg writes SVG.
    let png = dir.path().join("out.png");
    let out = rush(&addr, &["link", "qr", &code, "-o", png.to_str().unwrap()]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let img = image::open(&png).unwrap().to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1);
    assert_eq!(grids[0].decode().unwrap().1, short);
    let svg = dir.path().join("out.svg");
    let out = rush(&addr, &["link", "qr", &code, "-o", svg.to_str().unwrap()]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    // Aliases, conflicts and bad input are errors with a clear message.
    let out = rush(
        &addr,
        &[
            "shorten",
            "https://example.com/sale",
            "--alias",
            "sale",
            "--ttl",
            "none",
        ],
    )
    .await;
    assert_eq!((out.code, out.stdout.trim()), (0, "https://s.example/sale"));
    let out = rush(
        &addr,
        &["shorten", "https://example.com/other", "--alias", "sale"],
    )
    .await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("CONFLICT"), "{}", out.stderr);
    let out = rush(&addr, &["shorten", "javascript:alert(1)"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("BAD_REQUEST"), "{}", out.stderr);

    let out = rush(&addr, &["link", "delete", &code]).await;
    assert_eq!((out.code, out.stdout.trim()), (0, "deleted"));
    let out = rush(&addr, &["link", "delete", &code]).await;
    assert_eq!((out.code, out.stdout.trim()), (0, "(not found)"));
    let out = rush(&addr, &["resolve", &code]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("NOT_FOUND"), "{}", out.stderr);
    node.stop().await;
}
