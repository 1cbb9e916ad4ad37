//! Rush's services as RESP commands (`LINK.*`, `LIMIT.*`, `CATALOG.*`,
//! `ENVELOPE.*`) against a real rushd: every command's reply shape in RESP2
//! (flat field/value arrays) and RESP3 (maps), denials as replies, argument
//! errors, expiry on the daemon's clock, the admin rule, agreement with the
//! binary protocol, and `redis-cli` running each family.

mod common;

use common::{redis_cli, redis_cli_cases, TestNode};
use rush_client::protocol::cmd::Scope;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BASE_URL: &str = "https://s.test/";

/// A node whose short URLs start with [`BASE_URL`] and whose app links may
/// use the `app:` scheme.
async fn start() -> TestNode {
    TestNode::start_with(|c| {
        c.links.base_url = BASE_URL.into();
        c.links.app_schemes = vec!["app".into()];
    })
    .await
}

fn resp_addr(node: &TestNode) -> SocketAddr {
    node.running().resp_addr().expect("RESP listener on")
}

/// One RESP value, as a client reads it.
#[derive(Debug, Clone, PartialEq)]
enum V {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<V>),
    Map(Vec<(V, V)>),
}

/// One value from the front of `b` and its length; None while incomplete.
fn parse(b: &[u8]) -> Option<(V, usize)> {
    let line_end = b.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&b[1..line_end]).expect("a UTF-8 header line");
    let next = line_end + 2;
    let n = || line.parse::<i64>().expect("a length");
    let items = |count: usize, mut at: usize| -> Option<(Vec<V>, usize)> {
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let (v, len) = parse(&b[at..])?;
            out.push(v);
            at += len;
        }
        Some((out, at))
    };
    Some(match b[0] {
        b'+' => (V::Simple(line.into()), next),
        b'-' => (V::Error(line.into()), next),
        b':' => (V::Int(n()), next),
        b'_' => (V::Null, next),
        b'$' if n() < 0 => (V::Null, next),
        b'$' => {
            let len = n() as usize;
            if b.len() < next + len + 2 {
                return None;
            }
            (V::Bulk(b[next..next + len].to_vec()), next + len + 2)
        }
        b'*' => {
            let (vs, end) = items(n() as usize, next)?;
            (V::Array(vs), end)
        }
        b'%' => {
            let (vs, end) = items(2 * n() as usize, next)?;
            let mut pairs = Vec::new();
            let mut it = vs.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            (V::Map(pairs), end)
        }
        t => panic!(
            "unexpected RESP type {:?} in {:?}",
            t as char,
            String::from_utf8_lossy(b)
        ),
    })
}

impl V {
    fn int(&self) -> i64 {
        match self {
            V::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    fn text(&self) -> String {
        match self {
            V::Bulk(b) => String::from_utf8(b.clone()).expect("UTF-8"),
            other => panic!("not a bulk string: {other:?}"),
        }
    }

    fn items(&self) -> &[V] {
        match self {
            V::Array(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }

    fn error(&self) -> &str {
        match self {
            V::Error(e) => e,
            other => panic!("not an error: {other:?}"),
        }
    }
}

/// A reply's fields, in order: it must be a map in RESP3 and a flat
/// field/value array in RESP2.
#[derive(Debug)]
struct Fields(Vec<(String, V)>);

impl Fields {
    fn of(v: &V, resp3: bool) -> Fields {
        let pairs = match (v, resp3) {
            (V::Map(p), true) => p.iter().map(|(k, v)| (k.text(), v.clone())).collect(),
            (V::Array(a), false) => {
                assert!(a.len() % 2 == 0, "odd field/value array: {a:?}");
                a.chunks(2).map(|p| (p[0].text(), p[1].clone())).collect()
            }
            other => panic!(
                "not a {} map: {other:?}",
                if resp3 { "RESP3" } else { "RESP2" }
            ),
        };
        Fields(pairs)
    }

    fn names(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_str()).collect()
    }

    fn get(&self, name: &str) -> &V {
        &self
            .0
            .iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("no field {name:?} in {:?}", self.0))
            .1
    }

    fn int(&self, name: &str) -> i64 {
        self.get(name).int()
    }

    fn text(&self, name: &str) -> String {
        self.get(name).text()
    }
}

/// A RESP connection, in RESP3 after `HELLO 3` when asked.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    resp3: bool,
}

impl Conn {
    async fn open(addr: SocketAddr, resp3: bool) -> Conn {
        Conn::open_as(addr, resp3, None).await
    }

    /// After `AUTH token`, when given.
    async fn open_as(addr: SocketAddr, resp3: bool, token: Option<&str>) -> Conn {
        let mut c = Conn {
            s: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
            resp3,
        };
        if let Some(token) = token {
            assert_eq!(c.call(&["AUTH", token]).await, V::Simple("OK".into()));
        }
        if resp3 {
            assert!(matches!(c.call(&["HELLO", "3"]).await, V::Map(_)));
        }
        c
    }

    /// One command's reply, as its bytes.
    async fn raw(&mut self, args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.s.write_all(&out).await.unwrap();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some((_, len)) = parse(&self.buf) {
                return self.buf.drain(..len).collect();
            }
            let n = tokio::time::timeout(Duration::from_secs(10), self.s.read(&mut chunk))
                .await
                .unwrap_or_else(|_| panic!("no answer to {args:?} within 10 s"))
                .unwrap();
            assert!(n > 0, "closed; {args:?} unanswered");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn call(&mut self, args: &[&str]) -> V {
        parse(&self.raw(args).await).unwrap().0
    }

    /// A reply that must be a map (RESP3) or field/value array (RESP2).
    async fn fields(&mut self, args: &[&str]) -> Fields {
        let v = self.call(args).await;
        Fields::of(&v, self.resp3)
    }

    async fn null(&mut self, args: &[&str]) {
        let want: &[u8] = if self.resp3 { b"_\r\n" } else { b"$-1\r\n" };
        assert_eq!(
            String::from_utf8_lossy(&self.raw(args).await),
            String::from_utf8_lossy(want),
            "{args:?}"
        );
    }
}

/// `body` once on a RESP2 connection and once on a RESP3 one (`resp3`), with
/// a prefix (`r2`, `r3`) that keeps each run's keys apart.
async fn in_both_protocols(node: &TestNode, mut body: impl AsyncFnMut(Conn, bool, &str)) {
    for resp3 in [false, true] {
        let p = if resp3 { "r3" } else { "r2" };
        body(Conn::open(resp_addr(node), resp3).await, resp3, p).await;
    }
}

/// `at` is `plus_ms` after a moment between `from_ms` (read before the
/// command was sent) and `to_ms` (after its reply). A pass that started
/// just before the command was sent may read it: a second of slack below.
fn within(at: i64, from_ms: u64, to_ms: u64, plus_ms: u64) {
    let at = at as u64;
    assert!(
        (from_ms + plus_ms - 1000..=to_ms + plus_ms).contains(&at),
        "{at} is not {plus_ms} ms after [{from_ms}, {to_ms}]"
    );
}

#[tokio::test]
async fn links_answer_in_their_shapes() {
    let node = start().await;
    in_both_protocols(&node, async |mut c, resp3, p| {
        let url = format!("https://e.com/{p}/a");

        let before = node.clock.now_ms();
        let s = c
            .fields(&[
                "LINK.SHORTEN",
                &url,
                "ACCOUNT",
                "acme",
                "EX",
                "100",
                "REUSE",
            ])
            .await;
        let after = node.clock.now_ms();
        assert_eq!(s.names(), ["code", "short_url", "reused", "expires_at_ms"]);
        let code = s.text("code");
        assert_eq!(code.len(), 7, "the default length");
        assert_eq!(s.text("short_url"), format!("{BASE_URL}{code}"));
        assert_eq!(s.int("reused"), 0);
        within(s.int("expires_at_ms"), before, after, 100_000);
        let again = c
            .fields(&["LINK.SHORTEN", &url, "ACCOUNT", "acme", "REUSE"])
            .await;
        assert_eq!((again.text("code"), again.int("reused")), (code.clone(), 1));
        // The binary protocol sees the same link.
        assert_eq!(
            node.client.resolve(code.as_str()).await.unwrap().target,
            url
        );

        let alias = format!("{p}-promo");
        let a = c
            .fields(&[
                "LINK.ALIAS",
                &alias,
                "https://e.com/p",
                "PERSIST",
                "IOS",
                "app://p",
            ])
            .await;
        assert_eq!(a.text("code"), alias);
        assert_eq!(a.int("expires_at_ms"), 0);
        // Taken: null, as SET NX answers.
        c.null(&["LINK.ALIAS", &alias, "https://e.com/other"]).await;

        let r = c.fields(&["LINK.RESOLVE", &alias]).await;
        assert_eq!(
            r.names(),
            [
                "target",
                "ios",
                "android",
                "redirect",
                "query_passthrough",
                "expires_at_ms"
            ]
        );
        assert_eq!(r.text("target"), "https://e.com/p");
        assert_eq!(r.text("ios"), "app://p");
        assert_eq!(r.get("android"), &V::Null);
        assert_eq!((r.int("redirect"), r.int("query_passthrough")), (302, 1));
        assert_eq!(r.int("expires_at_ms"), 0);

        let before = node.clock.now_ms();
        let expires = c
            .call(&["LINK.UPDATE", &alias, "PERMANENT", "DROPQUERY", "EX", "10"])
            .await;
        within(expires.int(), before, node.clock.now_ms(), 10_000);
        let i = c.fields(&["LINK.INFO", &alias]).await;
        assert_eq!(
            i.names(),
            [
                "code",
                "short_url",
                "target",
                "account",
                "ios",
                "android",
                "redirect",
                "query_passthrough",
                "alias",
                "created_at_ms",
                "expires_at_ms",
                "ttl_ms",
                "visits",
                "last_visit_ms",
                "daily"
            ]
        );
        assert_eq!((i.int("redirect"), i.int("query_passthrough")), (301, 0));
        assert_eq!((i.int("alias"), i.int("ttl_ms")), (1, 10_000));
        assert_eq!(i.text("short_url"), format!("{BASE_URL}{alias}"));
        assert_eq!(i.int("expires_at_ms"), expires.int());
        assert!(matches!(
            (i.get("daily"), resp3),
            (V::Map(_), true) | (V::Array(_), false)
        ));

        // The link expires on the daemon's clock.
        node.client
            .clock_advance(Duration::from_secs(11))
            .await
            .unwrap();
        c.null(&["LINK.RESOLVE", &alias]).await;
        c.null(&["LINK.INFO", &alias]).await;
        c.null(&["LINK.UPDATE", &alias, "PERSIST"]).await;

        assert_eq!(c.call(&["LINK.DELETE", &code]).await, V::Int(1));
        assert_eq!(c.call(&["LINK.DELETE", &code]).await, V::Int(0));
        c.null(&["LINK.RESOLVE", &code]).await;

        // Arguments refused here, and by the service.
        let e = c.call(&["LINK.SHORTEN", &url, "EX", "0"]).await;
        assert_eq!(
            e.error(),
            "ERR invalid expire time in 'link.shorten' command"
        );
        let e = c.call(&["LINK.SHORTEN", &url, "SOON"]).await;
        assert_eq!(e.error(), "ERR syntax error");
        let e = c.call(&["LINK.UPDATE", &code]).await;
        assert_eq!(
            e.error(),
            "ERR wrong number of arguments for 'link.update' command"
        );
        let e = c.call(&["LINK.SHORTEN", "not a url"]).await;
        assert!(e.error().starts_with("ERR "), "{e:?}");
        let e = c.call(&["LINK.ALIAS", "no spaces", "https://e.com/"]).await;
        assert!(e.error().starts_with("ERR invalid alias"), "{e:?}");
    })
    .await;
    node.stop().await;
}

#[tokio::test]
async fn limits_answer_and_deny_in_their_shapes() {
    let node = start().await;
    in_both_protocols(&node, async |mut c, resp3, p| {
        let policy = format!("{p}-hourly");
        let set = c
            .fields(&[
                "LIMIT.POLICY",
                "SET",
                &policy,
                "RULE",
                "each",
                "ITEM",
                "2",
                "sliding:3600",
                "RULE",
                "all",
                "TOTAL",
                "3",
                "sliding:3600",
            ])
            .await;
        assert_eq!(set.names(), ["created", "policy"]);
        assert_eq!(set.int("created"), 1);
        let shown = Fields::of(set.get("policy"), resp3);
        assert_eq!(shown.names(), ["name", "durability", "rules"]);
        assert_eq!(
            (shown.text("name"), shown.text("durability")),
            (policy.clone(), "sync".into())
        );
        let rules: Vec<Fields> = shown
            .get("rules")
            .items()
            .iter()
            .map(|r| Fields::of(r, resp3))
            .collect();
        assert_eq!(rules[0].names(), ["name", "scope", "max", "window"]);
        assert_eq!(
            (
                rules[1].text("name"),
                rules[1].text("scope"),
                rules[1].int("max"),
                rules[1].text("window")
            ),
            ("all".into(), "total".into(), 3, "sliding:3600/60".into())
        );
        let got = c.fields(&["LIMIT.POLICY", "GET", &policy]).await;
        assert_eq!(got.text("name"), policy);
        c.null(&["LIMIT.POLICY", "GET", "nothing-such"]).await;
        let list = c.call(&["LIMIT.POLICY", "LIST"]).await;
        assert!(list
            .items()
            .iter()
            .any(|p| Fields::of(p, resp3).text("name") == policy));

        let user = format!("{{{p}}}amy");
        let order = [
            "LIMIT.ACQUIRE",
            &policy,
            &user,
            "o1",
            "sku-1",
            "2",
            "sku-2",
            "1",
        ];
        let before = node.clock.now_ms();
        let ok = c.fields(&order).await;
        assert_eq!(
            ok.names(),
            [
                "allowed",
                "replayed",
                "released",
                "rule",
                "item",
                "count",
                "limit",
                "remaining",
                "resets_at_ms",
                "allowances"
            ]
        );
        assert_eq!(
            (ok.int("allowed"), ok.int("replayed"), ok.int("released")),
            (1, 0, 0)
        );
        // The tightest rule speaks for the order: sku-1 used its 2.
        assert_eq!(
            (ok.text("rule"), ok.text("item")),
            ("each".into(), "sku-1".into())
        );
        assert_eq!(
            (ok.int("count"), ok.int("limit"), ok.int("remaining")),
            (2, 2, 0)
        );
        let resets = ok.int("resets_at_ms") as u64;
        // A sliding window's count drops when its oldest sub-bucket ends.
        assert!(
            resets > before && resets <= node.clock.now_ms() + 3_660_000,
            "{resets}"
        );
        let each: Vec<(String, String, i64, i64)> = ok
            .get("allowances")
            .items()
            .iter()
            .map(|a| {
                let a = Fields::of(a, resp3);
                assert_eq!(
                    a.names(),
                    [
                        "rule",
                        "item",
                        "count",
                        "limit",
                        "remaining",
                        "resets_at_ms"
                    ]
                );
                (
                    a.text("rule"),
                    a.text("item"),
                    a.int("count"),
                    a.int("remaining"),
                )
            })
            .collect();
        assert_eq!(
            each,
            [
                ("each".to_string(), "sku-1".to_string(), 2, 0),
                ("each".to_string(), "sku-2".to_string(), 1, 1),
                ("all".to_string(), String::new(), 3, 0),
            ]
        );
        let replay = c.fields(&order).await;
        assert_eq!((replay.int("allowed"), replay.int("replayed")), (1, 1));

        // Over the total: a denial is a reply with the same fields.
        let raw = c
            .raw(&["LIMIT.ACQUIRE", &policy, &user, "o2", "sku-3", "1"])
            .await;
        let head: &[u8] = if resp3 {
            b"%10\r\n$7\r\nallowed\r\n:0\r\n"
        } else {
            b"*20\r\n$7\r\nallowed\r\n:0\r\n"
        };
        assert!(raw.starts_with(head), "{:?}", String::from_utf8_lossy(&raw));
        let no = Fields::of(&parse(&raw).unwrap().0, resp3);
        assert_eq!(no.names(), ok.names());
        assert_eq!(
            (no.text("rule"), no.text("item")),
            ("all".into(), "".into())
        );
        assert_eq!(
            (no.int("count"), no.int("limit"), no.int("remaining")),
            (3, 3, 0)
        );
        assert!(no.get("allowances").items().is_empty());
        // Nothing was counted.
        let st = node
            .client
            .limit_status(policy.as_str(), user.clone())
            .await
            .unwrap();
        assert_eq!(st.count("all", ""), 3);

        let status = c.fields(&["LIMIT.STATUS", &policy, &user]).await;
        assert_eq!(status.names(), ["allowances", "truncated"]);
        assert_eq!(status.get("allowances").items().len(), 3);
        assert_eq!(status.int("truncated"), 0);

        let rel = c.fields(&["LIMIT.RELEASE", &policy, &user, "o1"]).await;
        assert_eq!(rel.names(), ["replayed", "items"]);
        assert_eq!(rel.int("replayed"), 0);
        let items = Fields::of(rel.get("items"), resp3);
        assert_eq!(
            (items.names(), items.int("sku-1"), items.int("sku-2")),
            (vec!["sku-1", "sku-2"], 2, 1)
        );
        assert_eq!(
            c.fields(&["LIMIT.RELEASE", &policy, &user, "o1"])
                .await
                .int("replayed"),
            1
        );
        c.null(&["LIMIT.RELEASE", &policy, &user, "never"]).await;
        let now = c
            .fields(&["LIMIT.ACQUIRE", &policy, &user, "o2", "sku-3", "1"])
            .await;
        assert_eq!(now.int("allowed"), 1);

        // The window ends on the daemon's clock.
        for i in 3..5 {
            let o = format!("o{i}");
            c.fields(&["LIMIT.ACQUIRE", &policy, &user, &o, "sku-4", "1"])
                .await;
        }
        let full = c
            .fields(&["LIMIT.ACQUIRE", &policy, &user, "o5", "sku-5", "1"])
            .await;
        assert_eq!(full.int("allowed"), 0);
        node.client
            .clock_advance(Duration::from_secs(3700))
            .await
            .unwrap();
        let fresh = c
            .fields(&["LIMIT.ACQUIRE", &policy, &user, "o5", "sku-5", "1"])
            .await;
        assert_eq!((fresh.int("allowed"), fresh.int("count")), (1, 1));

        // Arguments refused here, and by the service.
        let e = c
            .call(&["LIMIT.ACQUIRE", &policy, &user, "o9", "sku-1"])
            .await;
        assert_eq!(
            e.error(),
            "ERR wrong number of arguments for 'limit.acquire' command"
        );
        let e = c
            .call(&["LIMIT.ACQUIRE", &policy, &user, "o9", "sku-1", "two"])
            .await;
        assert_eq!(e.error(), "ERR value is not an integer or out of range");
        let e = c
            .call(&["LIMIT.ACQUIRE", &policy, &user, "o9", "sku-1", "0"])
            .await;
        assert!(e.error().starts_with("ERR invalid quantity"), "{e:?}");
        let e = c
            .call(&["LIMIT.ACQUIRE", "no-policy", &user, "o9", "sku-1", "1"])
            .await;
        assert!(e.error().starts_with("ERR unknown limit policy"), "{e:?}");
        let e = c
            .call(&[
                "LIMIT.POLICY",
                "SET",
                &policy,
                "RULE",
                "r",
                "item",
                "1",
                "week",
            ])
            .await;
        assert!(e.error().contains("is not a window"), "{e:?}");
        let e = c.call(&["LIMIT.POLICY", "PURGE"]).await;
        assert!(
            e.error().starts_with("ERR unknown subcommand 'PURGE'"),
            "{e:?}"
        );
    })
    .await;
    // A policy made over RESP is the binary protocol's too.
    let binary = common::limit_policy("bin", &[("each", Scope::Item, 1, "day")]);
    node.client.limit_policy_set(binary).await.unwrap();
    let mut c = Conn::open(resp_addr(&node), false).await;
    let a = c
        .fields(&["LIMIT.ACQUIRE", "bin", "u", "o", "x", "2"])
        .await;
    assert_eq!(
        (a.int("allowed"), a.text("rule"), a.int("count")),
        (0, "each".into(), 0)
    );
    node.stop().await;
}

#[tokio::test]
async fn catalog_answers_in_its_shapes() {
    let node = start().await;
    in_both_protocols(&node, async |mut c, resp3, p| {
        let owner = format!("{p}:m1");
        let put: [&str; 12] = [
            "CATALOG.PUT",
            &owner,
            "c1",
            "FROM",
            "1000",
            "UNTIL",
            "2000",
            "ATTRS",
            "city",
            "sh",
            "tier",
            "gold",
        ];
        assert_eq!(c.call(&put).await, V::Int(1));
        assert_eq!(c.call(&put).await, V::Int(0), "replaced");
        assert_eq!(
            c.call(&["CATALOG.PUT", &owner, "c2", "ATTRS", "city", "bj"])
                .await,
            V::Int(1)
        );

        let ids = |v: &V| -> Vec<String> {
            v.items()
                .iter()
                .map(|r| Fields::of(r, resp3).text("id"))
                .collect()
        };
        let all = c.call(&["CATALOG.QUERY", &owner]).await;
        assert_eq!(ids(&all), ["c1", "c2"]);
        let c1 = Fields::of(&all.items()[0], resp3);
        assert_eq!(
            c1.names(),
            ["id", "valid_from_ms", "valid_until_ms", "attributes"]
        );
        assert_eq!(
            (c1.int("valid_from_ms"), c1.int("valid_until_ms")),
            (1000, 2000)
        );
        let attrs = Fields::of(c1.get("attributes"), resp3);
        assert_eq!(
            (attrs.text("city"), attrs.text("tier")),
            ("sh".into(), "gold".into())
        );
        let c2 = Fields::of(&all.items()[1], resp3);
        assert_eq!(
            (c2.get("valid_from_ms"), c2.get("valid_until_ms")),
            (&V::Null, &V::Null)
        );
        assert_eq!(
            ids(&c
                .call(&["CATALOG.QUERY", &owner, "WHERE", "city", "sh"])
                .await),
            ["c1"]
        );
        assert_eq!(
            ids(&c.call(&["CATALOG.QUERY", &owner, "AT", "1500"]).await),
            ["c1", "c2"]
        );
        assert_eq!(
            ids(&c.call(&["CATALOG.QUERY", &owner, "AT", "2000"]).await),
            ["c2"]
        );
        let nobody = format!("{p}:nobody");
        assert_eq!(c.raw(&["CATALOG.QUERY", &nobody]).await, b"*0\r\n");

        let alias = format!("{p}-acme");
        assert_eq!(
            c.call(&["CATALOG.ALIAS", "SET", "name", &alias, &owner])
                .await,
            V::Int(1)
        );
        assert_eq!(
            c.call(&["CATALOG.ALIAS", "SET", "name", &alias, &owner])
                .await,
            V::Int(0)
        );
        assert_eq!(
            c.call(&["CATALOG.ALIAS", "GET", "name", &alias])
                .await
                .text(),
            owner
        );
        c.null(&["CATALOG.ALIAS", "GET", "account", &alias]).await;
        assert_eq!(
            c.call(&["CATALOG.ALIAS", "DEL", "name", &alias]).await,
            V::Int(1)
        );
        assert_eq!(
            c.call(&["CATALOG.ALIAS", "DEL", "name", &alias]).await,
            V::Int(0)
        );
        c.null(&["CATALOG.ALIAS", "GET", "name", &alias]).await;

        assert_eq!(c.call(&["CATALOG.DEL", &owner, "c2"]).await, V::Int(1));
        assert_eq!(c.call(&["CATALOG.DEL", &owner, "c2"]).await, V::Int(0));
        // The binary protocol sees the same records.
        let recs = node
            .client
            .catalog_query(owner.clone(), &Default::default())
            .await
            .unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(
            c.call(&["CATALOG.SHED", "off"]).await,
            V::Simple("OK".into())
        );

        let e = c
            .call(&["CATALOG.PUT", &owner, "c3", "FROM", "5", "UNTIL", "5"])
            .await;
        assert!(e.error().starts_with("ERR invalid validity"), "{e:?}");
        let e = c.call(&["CATALOG.PUT", &owner, "c3", "city", "sh"]).await;
        assert_eq!(e.error(), "ERR syntax error");
        let e = c.call(&["CATALOG.ALIAS", "RENAME", "a", "b"]).await;
        assert!(
            e.error().starts_with("ERR unknown subcommand 'RENAME'"),
            "{e:?}"
        );
    })
    .await;
    node.stop().await;
}

#[tokio::test]
async fn envelopes_answer_deny_and_expire_in_their_shapes() {
    let node = start().await;
    in_both_protocols(&node, async |mut c, resp3, p| {
        let sender = format!("{p}-bob");
        let before = node.clock.now_ms();
        let made = c
            .fields(&[
                "ENVELOPE.CREATE",
                &sender,
                "100",
                "2",
                "MODE",
                "fixed",
                "EX",
                "60",
            ])
            .await;
        assert_eq!(made.names(), ["id", "expires_at_ms"]);
        within(
            made.int("expires_at_ms"),
            before,
            node.clock.now_ms(),
            60_000,
        );
        let id = made.int("id").to_string();

        let g = c.fields(&["ENVELOPE.GRAB", &id, "amy"]).await;
        assert_eq!(g.names(), ["grabbed", "amount_cents", "repeated", "reason"]);
        assert_eq!(
            (g.int("grabbed"), g.int("amount_cents"), g.int("repeated")),
            (1, 50, 0)
        );
        assert_eq!(g.text("reason"), "");
        let again = c.fields(&["ENVELOPE.GRAB", &id, "amy"]).await;
        assert_eq!(
            (
                again.int("grabbed"),
                again.int("amount_cents"),
                again.int("repeated")
            ),
            (1, 50, 1)
        );
        assert_eq!(
            c.fields(&["ENVELOPE.GRAB", &id, "cy"])
                .await
                .int("amount_cents"),
            50
        );
        // No share left: a reply, byte for byte.
        let empty = c.raw(&["ENVELOPE.GRAB", &id, "dan"]).await;
        let fields = "$7\r\ngrabbed\r\n:0\r\n$12\r\namount_cents\r\n:0\r\n$8\r\nrepeated\r\n:0\r\n$6\r\nreason\r\n$5\r\nempty\r\n";
        let want = format!("{}{fields}", if resp3 { "%4\r\n" } else { "*8\r\n" });
        assert_eq!(String::from_utf8_lossy(&empty), want);

        let info = c.fields(&["ENVELOPE.INFO", &id]).await;
        assert_eq!(
            info.names(),
            [
                "id",
                "sender",
                "mode",
                "state",
                "total_cents",
                "remaining_cents",
                "refunded_cents",
                "count",
                "grabbed",
                "created_at_ms",
                "expires_at_ms",
                "grabs"
            ]
        );
        assert_eq!(
            (info.text("sender"), info.text("mode"), info.text("state")),
            (sender.clone(), "fixed".into(), "empty".into())
        );
        assert_eq!(
            (
                info.int("total_cents"),
                info.int("remaining_cents"),
                info.int("grabbed")
            ),
            (100, 0, 2)
        );
        let grabs: Vec<(String, i64)> = info
            .get("grabs")
            .items()
            .iter()
            .map(|g| {
                let g = Fields::of(g, resp3);
                assert_eq!(g.names(), ["user", "amount_cents", "at_ms"]);
                (g.text("user"), g.int("amount_cents"))
            })
            .collect();
        assert_eq!(grabs, [("amy".to_string(), 50), ("cy".to_string(), 50)]);
        // The binary protocol sees the same books.
        let bin = node
            .client
            .envelope_info(id.parse::<u64>().unwrap())
            .await
            .unwrap();
        assert_eq!(bin.grabs.len(), 2);

        // An envelope left open is refunded when it expires on the daemon's clock.
        let open = c
            .fields(&["ENVELOPE.CREATE", &sender, "300", "3", "EX", "60"])
            .await;
        let open_id = open.int("id").to_string();
        let amy = c
            .fields(&["ENVELOPE.GRAB", &open_id, "amy"])
            .await
            .int("amount_cents");
        node.client
            .clock_advance(Duration::from_secs(61))
            .await
            .unwrap();
        let late = c.fields(&["ENVELOPE.GRAB", &open_id, "zed"]).await;
        assert_eq!(
            (late.int("grabbed"), late.text("reason")),
            (0, "expired".into())
        );
        assert_eq!(
            c.fields(&["ENVELOPE.GRAB", &open_id, "amy"])
                .await
                .int("repeated"),
            1
        );
        let page = c.fields(&["ENVELOPE.REFUNDS", "COUNT", "10"]).await;
        assert_eq!(page.names(), ["refunds", "next", "more"]);
        let refunds = page.get("refunds").items();
        assert_eq!(refunds.len(), 1, "{page:?}");
        let r = Fields::of(&refunds[0], resp3);
        assert_eq!(
            r.names(),
            [
                "envelope_id",
                "cursor",
                "sender",
                "amount_cents",
                "refunded_at_ms"
            ]
        );
        assert_eq!(r.int("envelope_id").to_string(), open_id);
        assert_eq!(
            (r.text("sender"), r.int("amount_cents")),
            (sender.clone(), 300 - amy)
        );
        assert_eq!(page.int("more"), 0);
        let next = page.text("next");
        assert_eq!(c.call(&["ENVELOPE.ACK", &next]).await, V::Int(1));
        let after = c.fields(&["ENVELOPE.REFUNDS", "AFTER", &next]).await;
        assert!(after.get("refunds").items().is_empty());
        let info = c.fields(&["ENVELOPE.INFO", &open_id]).await;
        assert_eq!(
            (info.text("state"), info.int("refunded_cents")),
            ("refunded".into(), 300 - amy)
        );

        let audit = c.fields(&["ENVELOPE.AUDIT"]).await;
        assert_eq!(
            audit.names(),
            [
                "ok",
                "envelopes",
                "grabs",
                "open",
                "in_flight_cents",
                "refunded",
                "problem_count",
                "problems"
            ]
        );
        assert_eq!(
            (
                audit.int("ok"),
                audit.int("open"),
                audit.int("problem_count")
            ),
            (1, 0, 0)
        );
        assert!(audit.get("problems").items().is_empty());

        // No such envelope: null.
        c.null(&["ENVELOPE.INFO", "0"]).await;
        c.null(&["ENVELOPE.GRAB", "0", "amy"]).await;
        // Arguments refused here, and by the service.
        let e = c.call(&["ENVELOPE.CREATE", &sender, "1", "2"]).await;
        assert!(e.error().starts_with("ERR "), "{e:?}");
        let e = c
            .call(&["ENVELOPE.CREATE", &sender, "100", "2", "MODE", "lucky"])
            .await;
        assert!(e.error().contains("is not a mode"), "{e:?}");
        let e = c.call(&["ENVELOPE.GRAB", "my-envelope", "amy"]).await;
        assert_eq!(e.error(), "ERR value is not an integer or out of range");
        let e = c.call(&["ENVELOPE.ACK", "soon"]).await;
        assert!(e.error().contains("is not a refund cursor"), "{e:?}");
    })
    .await;
    node.stop().await;
}

/// Admin-only requests keep their rule on RESP: a client token gets
/// `NOPERM`, the admin token gets answers.
#[tokio::test]
async fn admin_commands_need_the_admin_token() {
    let secrets = tempfile::tempdir().unwrap();
    let clients = secrets.path().join("clients.tokens");
    let admins = secrets.path().join("admin.tokens");
    std::fs::write(&clients, "shop:svc-s3cret-41\n").unwrap();
    std::fs::write(&admins, "ops:svc-adm1n-42\n").unwrap();
    let node = TestNode::start_with(|c| {
        c.auth.token_file = Some(clients.clone());
        c.auth.admin_token_file = Some(admins.clone());
    })
    .await;
    let addr = resp_addr(&node);
    let admin_only: [&[&str]; 5] = [
        &["LIMIT.POLICY", "SET", "p", "RULE", "r", "ITEM", "1", "day"],
        &["CATALOG.SHED", "on"],
        &["ENVELOPE.REFUNDS"],
        &["ENVELOPE.ACK", "0-0"],
        &["ENVELOPE.AUDIT"],
    ];
    let mut c = Conn::open(addr, false).await;
    let e = c.call(&["LINK.RESOLVE", "abcde"]).await;
    assert_eq!(e.error(), "NOAUTH Authentication required.");
    assert_eq!(
        c.call(&["AUTH", "svc-s3cret-41"]).await,
        V::Simple("OK".into())
    );
    c.null(&["LINK.RESOLVE", "abcde"]).await;
    for cmd in admin_only {
        let e = c.call(cmd).await;
        assert!(
            e.error().starts_with("NOPERM ") && e.error().contains("admin token"),
            "{cmd:?}: {e:?}"
        );
    }
    // Reading policies is anyone's.
    c.null(&["LIMIT.POLICY", "GET", "p"]).await;
    let mut a = Conn::open_as(addr, true, Some("svc-adm1n-42")).await;
    assert_eq!(a.fields(admin_only[0]).await.int("created"), 1);
    assert_eq!(a.call(admin_only[1]).await, V::Simple("OK".into()));
    assert_eq!(
        a.call(&["CATALOG.SHED", "off"]).await,
        V::Simple("OK".into())
    );
    assert_eq!(
        a.fields(admin_only[2]).await.names(),
        ["refunds", "next", "more"]
    );
    assert_eq!(a.call(admin_only[3]).await, V::Int(0));
    assert_eq!(a.fields(admin_only[4]).await.int("ok"), 1);
    // The client sees the admin's policy.
    assert_eq!(
        c.fields(&["LIMIT.POLICY", "GET", "p"]).await.text("name"),
        "p"
    );
    node.stop().await;
}

// redis-cli blocks its thread; the node's accept loop needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_runs_each_family_in_resp2_and_resp3() {
    let node = start().await;
    let addr = resp_addr(&node);
    for resp3 in [false, true] {
        let p = if resp3 { "r3" } else { "r2" };
        let names = [
            format!("{p}-cap"),
            format!("{p}-cli"),
            format!("{p}:shop"),
            format!("{p}-sue"),
        ];
        let [policy, alias, owner, sender] = names.each_ref().map(String::as_str);
        let cases: Vec<(Vec<&str>, String)> = vec![
            (
                vec![
                    "LIMIT.POLICY",
                    "SET",
                    policy,
                    "RULE",
                    "each",
                    "ITEM",
                    "1",
                    "day:UTC",
                ],
                if resp3 {
                    format!("created 1\npolicy name {policy}\ndurability sync\nrules name each\nscope item\nmax 1\nwindow day:UTC")
                } else {
                    format!("created\n1\npolicy\nname\n{policy}\ndurability\nsync\nrules\nname\neach\nscope\nitem\nmax\n1\nwindow\nday:UTC")
                },
            ),
            (
                vec!["LIMIT.RELEASE", policy, "amy", "nothing"],
                String::new(),
            ),
            (
                vec!["LINK.ALIAS", alias, "https://e.com/cli", "PERSIST"],
                if resp3 {
                    format!("code {alias}\nshort_url {BASE_URL}{alias}\nreused 0\nexpires_at_ms 0")
                } else {
                    format!(
                        "code\n{alias}\nshort_url\n{BASE_URL}{alias}\nreused\n0\nexpires_at_ms\n0"
                    )
                },
            ),
            (vec!["LINK.DELETE", alias], "1".into()),
            (
                vec![
                    "CATALOG.PUT",
                    owner,
                    "c1",
                    "FROM",
                    "5",
                    "ATTRS",
                    "city",
                    "sh",
                ],
                "1".into(),
            ),
            (
                vec!["CATALOG.QUERY", owner, "WHERE", "city", "sh"],
                if resp3 {
                    "id c1\nvalid_from_ms 5\nvalid_until_ms \nattributes city sh".into()
                } else {
                    "id\nc1\nvalid_from_ms\n5\nvalid_until_ms\n\nattributes\ncity\nsh".into()
                },
            ),
        ];
        if !redis_cli_cases(addr, resp3, &cases) {
            return;
        }
        // An envelope: its id first, then its shares and the denial.
        let made = redis_cli(
            addr,
            resp3,
            &["ENVELOPE.CREATE", sender, "2", "1", "EX", "60"],
        )
        .unwrap();
        let id = made
            .split_whitespace()
            .nth(1)
            .expect("id, then its value")
            .to_string();
        let grab = redis_cli(addr, resp3, &["ENVELOPE.GRAB", &id, "amy"]).unwrap();
        let denied = redis_cli(addr, resp3, &["ENVELOPE.GRAB", &id, "bo"]).unwrap();
        if resp3 {
            assert_eq!(grab, "grabbed 1\namount_cents 2\nrepeated 0\nreason");
            assert_eq!(
                denied,
                "grabbed 0\namount_cents 0\nrepeated 0\nreason empty"
            );
        } else {
            assert_eq!(grab, "grabbed\n1\namount_cents\n2\nrepeated\n0\nreason");
            assert_eq!(
                denied,
                "grabbed\n0\namount_cents\n0\nrepeated\n0\nreason\nempty"
            );
        }
    }
    node.stop().await;
}
