//! Unit tests of `node`.

use super::*;
use crate::resp::table;

#[test]
fn globs_as_redis() {
    let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes());
    assert!(m("*", "maxmemory"));
    assert!(m("max*", "maxmemory-policy"));
    assert!(m("MAXMEMORY", "maxmemory"));
    assert!(!m("max", "maxmemory"));
    assert!(m("*-enabled", "cluster-enabled"));
    assert!(m("d?tabases", "databases"));
    assert!(m("[abc]ppendonly", "appendonly"));
    assert!(!m("[^a]ppendonly", "appendonly"));
    assert!(!m("[a-c]ave", "save") && m("[r-t]ave", "save"));
    assert!(m("sav\\e", "save"));
    assert!(!m("save?", "save"));
    assert!(!m(&"*a".repeat(200), "aaaa"));
}

#[test]
fn key_positions_follow_the_rows() {
    let pos = |name: &str, argc| key_positions(table::find(name).unwrap(), argc);
    assert_eq!(pos("get", 2), vec![1]);
    assert_eq!(pos("mget", 4), vec![1, 2, 3]);
    assert_eq!(pos("hset", 6), vec![1]);
    assert!(pos("ping", 1).is_empty());
}

#[test]
fn commands_decode_without_the_node() {
    let args =
        |s: &str| -> Vec<Bytes> { s.split(' ').map(|w| Bytes::from(w.to_string())).collect() };
    let now = |s: &str| match decode(
        &s.split(' ').next().unwrap().to_ascii_lowercase(),
        &args(s)[1..],
    ) {
        Some(Decoded::Now(n)) => n,
        _ => panic!("{s}"),
    };
    assert!(matches!(now("COMMAND COUNT"), Now::Integer(n) if n == table::SPECS.len() as i64));
    match now("COMMAND GETKEYS MGET a b") {
        Now::Value(Value::Array(keys)) => assert_eq!(keys.len(), 2),
        _ => panic!("GETKEYS"),
    }
    match now("COMMAND INFO get nosuch") {
        Now::Value(Value::Array(v)) => assert_eq!(v[1], Value::Null),
        _ => panic!("INFO"),
    }
    assert!(matches!(now("CLIENT SETNAME a\tb"), Now::Error(e) if e.contains("cannot contain")));
    assert!(
        matches!(now("CLIENT SETINFO color red"), Now::Error(e) if e.contains("Unrecognized option"))
    );
    assert!(matches!(now("CONFIG SET maxmemory 1"), Now::Error(e) if e.contains("not supported")));
    assert!(matches!(now("CLIENT KILL x"), Now::Error(e) if e.contains("unknown subcommand")));
    assert!(matches!(
        now("CLIENT LIST ID 3 4"),
        Now::Node(Ask::Client(ClientAsk::List(Some(ids)))) if ids == [3, 4]
    ));
}
