//! redis-py, a client nobody here wrote, against a real rushd's RESP
//! listener: every command of this slice in RESP2 and RESP3, pipelines, and
//! its errors as exceptions. It runs from the virtual environment that
//! `scripts/ensure-deps --redis-py` makes.

mod common;

use common::{prerequisite_missing, TestNode};
use std::path::PathBuf;
use std::process::Command;

const SCRIPT: &str = r#"
import os, sys, redis
port = int(os.environ["RUSH_RESP_PORT"])
for proto in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto, decode_responses=True)
    p = f"py{proto}:"
    assert r.ping() is True
    assert r.echo("hi") == "hi"
    assert r.set(p + "a", "1") is True
    assert r.get(p + "a") == "1"
    assert r.get(p + "missing") is None
    assert r.set(p + "a", "2", nx=True) is None
    assert r.set(p + "a", "3", xx=True, get=True) == "1"
    assert r.set(p + "e", "v", ex=100) is True
    assert r.ttl(p + "e") == 100
    assert 99000 <= r.pttl(p + "e") <= 100000
    assert r.expire(p + "e", 50) is True
    assert r.ttl(p + "e") == 50
    assert r.ttl(p + "missing") == -2
    assert r.incr(p + "n") == 1
    assert r.incrby(p + "n", 9) == 10
    assert r.decr(p + "n") == 9
    assert r.decrby(p + "n", 4) == 5
    tag = p + "{t}"
    r.set(tag + "x", "1"); r.set(tag + "y", "2")
    assert r.mget([tag + "x", tag + "y", tag + "z"]) == ["1", "2", None]
    assert r.exists(tag + "x", tag + "y", tag + "z") == 2
    assert r.delete(tag + "x", tag + "z") == 1
    assert r.hset(p + "h", mapping={"f": "1", "g": "2"}) == 2
    assert r.hget(p + "h", "f") == "1"
    assert r.hincrby(p + "h", "f", 41) == 42
    assert r.hgetall(p + "h") == {"f": "42", "g": "2"}
    assert r.hdel(p + "h", "g", "zz") == 1
    try:
        r.get(p + "h"); raise SystemExit("GET on a hash must fail")
    except redis.exceptions.ResponseError as e:
        assert str(e).startswith("WRONGTYPE"), e
    try:
        r.delete(p + "k1", p + "k2"); raise SystemExit("DEL across slots must fail")
    except redis.exceptions.ResponseError as e:
        assert str(e).startswith("Keys in request don't hash"), e
    try:
        r.execute_command("LPUSH", p + "l", "x"); raise SystemExit("LPUSH is not a command")
    except redis.exceptions.ResponseError as e:
        assert "unknown command 'LPUSH'" in str(e), e
    pipe = r.pipeline(transaction=False)
    for i in range(200):
        pipe.set(f"{p}pipe{i}", i)
        pipe.get(f"{p}pipe{i}")
    out = pipe.execute()
    assert out == [x for i in range(200) for x in (True, str(i))], out[:6]
    r.close()
print("ok")
"#;

fn venv_python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/venv-redis-py/bin/python")
}

#[tokio::test]
async fn redis_py_runs_every_command_and_pipelines() {
    let python = venv_python();
    if !python.exists() {
        return prerequisite_missing(
            "redis-py's virtual environment is missing",
            "run scripts/ensure-deps --redis-py",
        );
    }
    let node = TestNode::start().await;
    let port = node.running().resp_addr().expect("RESP on").port();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-c", SCRIPT])
            .env("RUSH_RESP_PORT", port.to_string())
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "redis-py: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    node.stop().await;
}
