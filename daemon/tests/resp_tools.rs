//! redis-py, a client nobody here wrote, against a real rushd's RESP
//! listener: every generic command in RESP2 and RESP3, pipelines,
//! transactions (`pipeline(transaction=True)`, WATCH that holds and that
//! breaks, CROSSSLOT, DISCARD), and its errors as exceptions. It runs from the virtual environment that
//! `scripts/ensure-deps --redis-py` makes.

mod common;

use common::{venv_python, TestNode};
use std::process::Command;

const SCRIPT: &str = r#"
import os, sys, time, redis
port = int(os.environ["RUSH_RESP_PORT"])
def connect(proto, **kw):
    return redis.Redis(host="127.0.0.1", port=port, protocol=proto, decode_responses=True, **kw)
def refused(call, want):
    try:
        call()
    except redis.exceptions.ResponseError as e:
        assert want in str(e), (want, e)
    else:
        raise SystemExit("must fail: " + want)
for proto in (2, 3):
    r = connect(proto)
    other = connect(proto)
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
    assert r.mset({tag + "m1": "1", tag + "m2": "2"}) is True
    assert r.msetnx({tag + "m2": "x", tag + "m3": "y"}) is False
    assert r.msetnx({tag + "m3": "x", tag + "m4": "y"}) is True
    assert r.mget([tag + "m1", tag + "m2", tag + "m3", tag + "m4"]) == ["1", "2", "x", "y"]
    assert r.unlink(tag + "m3", tag + "m4", tag + "m5") == 2
    refused(lambda: r.mset({p + "k1": "1", p + "k2": "2"}), "Keys in request don't hash")
    assert r.hset(p + "h", mapping={"f": "1", "g": "2"}) == 2
    assert r.hget(p + "h", "f") == "1"
    assert r.hincrby(p + "h", "f", 41) == 42
    assert r.hgetall(p + "h") == {"f": "42", "g": "2"}
    assert r.hdel(p + "h", "g", "zz") == 1
    assert r.hmget(p + "h", ["f", "zz"]) == ["42", None]
    assert r.hexists(p + "h", "f") is True
    assert r.hexists(p + "h", "zz") is False
    assert r.hlen(p + "h") == 1
    assert r.hsetnx(p + "h", "f", "x") == 0
    assert r.hsetnx(p + "h", "n", "x") == 1
    assert r.hlen(p + "h") == 2
    # The rest of the string commands.
    assert r.setnx(p + "s", "1") is True
    assert r.setnx(p + "s", "2") is False
    assert r.getdel(p + "s") == "1"
    assert r.getdel(p + "s") is None
    assert r.setex(p + "se", 100, "v") is True
    assert r.ttl(p + "se") == 100
    assert r.psetex(p + "pse", 100000, "w") is True
    assert r.get(p + "pse") == "w"
    assert r.getex(p + "se") == "v"
    assert r.getex(p + "se", persist=True) == "v"
    assert r.ttl(p + "se") == -1
    assert r.getex(p + "se", ex=50) == "v"
    assert r.ttl(p + "se") == 50
    assert r.getex(p + "se", px=40000) == "v"
    assert r.ttl(p + "se") == 40
    assert r.persist(p + "se") is True
    assert r.persist(p + "se") is False
    # Absolute times: the daemon's clock is the system's here (no test
    # moved it); resp.rs moves it past them.
    now = time.time()
    assert r.set(p + "at", "v", exat=int(now) + 100) is True
    assert 90 <= r.ttl(p + "at") <= 100
    assert r.set(p + "at", "v", pxat=int(now * 1000) + 100000) is True
    assert 90 <= r.ttl(p + "at") <= 100
    assert r.expireat(p + "at", int(now) + 200) is True
    assert 190 <= r.ttl(p + "at") <= 200
    assert r.pexpireat(p + "at", int(now * 1000) + 300000) is True
    assert 290 <= r.ttl(p + "at") <= 300
    assert r.getex(p + "at", exat=int(now) + 400) == "v"
    assert 390 <= r.ttl(p + "at") <= 400
    assert r.getex(p + "at", pxat=int(now * 1000) + 500000) == "v"
    assert 490 <= r.ttl(p + "at") <= 500
    assert r.expireat(p + "at", 1) is True
    assert r.exists(p + "at") == 0
    assert r.set(p + "at", "v", exat=1) is True
    assert r.exists(p + "at") == 0
    assert r.set(p + "kt", "v", ex=100) is True
    assert r.set(p + "kt", "w", keepttl=True) is True
    assert r.ttl(p + "kt") == 100
    assert r.set(p + "kt", "x", keepttl=True, xx=True, get=True) == "w"
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
    pipe = r.pipeline(transaction=False)
    pipe.hmget(p + "h", ["f"]).getex(p + "pse").setnx(p + "pse", "z").hexists(p + "h", "f")
    assert pipe.execute() == [["42"], "w", False, True]
    # Transactions: MULTI ... EXEC as one batch, in one slot.
    tx = r.pipeline(transaction=True)
    tx.set(tag + "tx", "1").incr(tag + "tx").get(tag + "tx")
    tx.hset(tag + "txh", "f", "v").hgetall(tag + "txh").hlen(tag + "txh")
    assert tx.execute() == [True, 2, "2", 1, {"f": "v"}, 1]
    # A WATCH that holds: the value is the one read.
    with r.pipeline() as w:
        w.watch(tag + "tx")
        n = int(w.get(tag + "tx"))
        w.multi()
        w.set(tag + "tx", n + 1)
        assert w.execute() == [True]
    assert r.get(tag + "tx") == "3"
    # A WATCH another connection breaks: WatchError, nothing written.
    with r.pipeline() as w:
        w.watch(tag + "tx")
        other.set(tag + "tx", "theirs")
        w.multi()
        w.set(tag + "tx", "mine")
        w.incr(tag + "count")
        try:
            w.execute(); raise SystemExit("EXEC after a watched key changed must fail")
        except redis.WatchError:
            pass
    assert r.get(tag + "tx") == "theirs"
    assert r.get(tag + "count") is None
    # Keys of two slots in one transaction: CROSSSLOT, nothing written.
    tx = r.pipeline(transaction=True)
    tx.set(tag + "tx", "x").set(p + "elsewhere", "y")
    refused(tx.execute, "Keys in request don't hash to the same slot")
    assert r.get(tag + "tx") == "theirs"
    assert r.get(p + "elsewhere") is None
    # A command refused while queued aborts EXEC (redis-py raises it).
    tx = r.pipeline(transaction=True)
    tx.set(tag + "tx", "x").execute_command("NOPE")
    refused(tx.execute, "unknown command 'NOPE'")
    assert r.get(tag + "tx") == "theirs"
    # DISCARD, and the words out of place, on one connection.
    s = connect(proto, single_connection_client=True)
    assert s.execute_command("MULTI") in (True, "OK")
    assert s.execute_command("INCRBY", tag + "count", 5) == "QUEUED"
    refused(lambda: s.execute_command("MULTI"), "MULTI calls can not be nested")
    refused(lambda: s.execute_command("WATCH", tag + "tx"), "WATCH inside MULTI is not allowed")
    assert s.execute_command("DISCARD") in (True, "OK")
    assert s.get(tag + "count") is None
    refused(lambda: s.execute_command("EXEC"), "EXEC without MULTI")
    refused(lambda: s.execute_command("DISCARD"), "DISCARD without MULTI")
    s.close()
    other.close()
    r.close()
print("ok")
"#;

#[tokio::test]
async fn redis_py_runs_every_command_and_pipelines() {
    let Some(python) = venv_python() else {
        return;
    };
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
