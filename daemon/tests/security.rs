//! Authentication and TLS through real daemons and clients.

mod common;

use common::{Spawned, TestNode};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientOptions, Tls};
use std::path::PathBuf;
use std::time::Duration;

const CLIENT_SECRET: &str = "cl13nt-s3cret-9f2a";
const ADMIN_SECRET: &str = "adm1n-s3cret-77c1";

fn token_files(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    let clients = dir.join("clients.tokens");
    let admins = dir.join("admin.tokens");
    std::fs::write(&clients, format!("# shop tenants\nshop:{CLIENT_SECRET}\n")).unwrap();
    std::fs::write(&admins, format!("ops:{ADMIN_SECRET}\n")).unwrap();
    (clients, admins)
}

fn with_token(token: Option<&str>) -> ClientOptions {
    ClientOptions {
        token: token.map(str::to_string),
        retry_deadline: Duration::ZERO,
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn tokens_gate_requests_and_admin_requests() {
    let secrets = tempfile::tempdir().unwrap();
    let (clients, admins) = token_files(secrets.path());
    let node = TestNode::start_with(|c| {
        c.auth.token_file = Some(clients.clone());
        c.auth.admin_token_file = Some(admins.clone());
    })
    .await;
    // (The test node's own client is connected with the admin token.)
    let addr = node.addr().to_string();
    let e = Client::connect_with(&addr, with_token(None))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized));
    let e = Client::connect_with(&addr, with_token(Some("guess")))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized));

    // A raw connection that skips HELLO is refused request by request.
    let conn = rush_client::Connection::connect(&addr, Duration::from_secs(5))
        .await
        .unwrap();
    let get = rush_client::protocol::cmd::Get { key: "k".into() };
    let e = conn.call(&get, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized));

    let client = Client::connect_with(&addr, with_token(Some(CLIENT_SECRET)))
        .await
        .unwrap();
    client.set("k", "v").await.unwrap();
    assert_eq!(client.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    let e = client.compact().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");

    let admin = Client::connect_with(&addr, with_token(Some(ADMIN_SECRET)))
        .await
        .unwrap();
    admin.compact().await.unwrap();
    admin.clock_advance(Duration::from_millis(1)).await.unwrap();

    let metrics = node.metrics().await;
    let failures = metrics
        .lines()
        .find(|l| l.starts_with("rush_auth_failures_total"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap();
    assert_eq!(failures, "2", "the two refused HELLOs");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let (clients, admins) = token_files(secrets.path());
    let log = secrets.path().join("rushd.log");
    let mut daemon = Spawned::start_logging(
        dir.path(),
        &[
            "--auth-token-file",
            clients.to_str().unwrap(),
            "--admin-token-file",
            admins.to_str().unwrap(),
        ],
        &log,
    );
    let addr = daemon.addr.to_string();
    let _ = Client::connect_with(&addr, with_token(Some("wrong-but-close-cl13nt-s3cret"))).await;
    let c = Client::connect_with(&addr, with_token(Some(CLIENT_SECRET)))
        .await
        .unwrap();
    c.set("k", "v").await.unwrap();
    let a = Client::connect_with(&addr, with_token(Some(ADMIN_SECRET)))
        .await
        .unwrap();
    a.compact().await.unwrap();
    assert!(daemon.terminate().success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("authentication required"),
        "the log is the debug log:\n{text}"
    );
    assert!(text.contains("wrong or missing token"));
    for secret in [CLIENT_SECRET, ADMIN_SECRET, "wrong-but-close"] {
        assert!(!text.contains(secret), "{secret} appears in the log");
    }
}

#[tokio::test]
async fn tls_on_the_protocol_listener() {
    let certs = tempfile::tempdir().unwrap();
    let rcgen::CertifiedKey { cert, key_pair } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_file = certs.path().join("cert.pem");
    let key_file = certs.path().join("key.pem");
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key_pair.serialize_pem()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut config = common::test_config(dir.path());
    config.tls.cert_file = Some(cert_file.clone());
    config.tls.key_file = Some(key_file.clone());
    let running = rush_daemon::start(config, rush_daemon::Clock::system())
        .await
        .unwrap();
    let addr = running.addr().to_string();

    let tls = Tls::from_ca_file(&cert_file, "localhost").unwrap();
    let client = Client::connect_with(
        &addr,
        ClientOptions {
            tls: Some(tls),
            ..with_token(None)
        },
    )
    .await
    .unwrap();
    client.set("over", "tls").await.unwrap();
    assert_eq!(
        client.get("over").await.unwrap().as_deref(),
        Some(&b"tls"[..])
    );

    // Plain TCP to a TLS listener gets nowhere (the handshake fails).
    let plain = Client::connect_with(
        &addr,
        ClientOptions {
            request_timeout: Duration::from_secs(5),
            ..with_token(None)
        },
    )
    .await;
    assert!(plain.is_err());
    // A certificate for another name is refused by the client.
    let wrong = Client::connect_with(
        &addr,
        ClientOptions {
            tls: Some(Tls::from_ca_file(&cert_file, "rush.example").unwrap()),
            ..with_token(None)
        },
    )
    .await;
    assert!(
        matches!(wrong, Err(rush_client::ClientError::Connect { .. })),
        "{wrong:?}"
    );
    running.shutdown().await.unwrap();
}
