//! CLIENT and the node's list of RESP clients.

use super::{arity_error, error, Ask, ClientAsk, Decoded};
use crate::resp::command::Now;
use crate::resp::value::Value;
use crate::resp::RespConn;
use crate::server::NodeShared;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// `CLIENT subcommand ...`; `None`: an unknown subcommand.
pub(super) fn client(sub: &str, a: &[Bytes]) -> Option<Decoded> {
    let ask = |c: ClientAsk| Decoded::Now(Now::Node(Ask::Client(c)));
    Some(match (sub, a.len()) {
        ("id", 0) => ask(ClientAsk::Id),
        ("getname", 0) => ask(ClientAsk::GetName),
        ("info", 0) => ask(ClientAsk::Info),
        ("setname", 1) => match valid_name(&a[0]) {
            true => ask(ClientAsk::SetName(a[0].clone())),
            false => error(BAD_NAME),
        },
        ("setinfo", 2) => {
            let attr = a[0].to_ascii_lowercase();
            let lib_name = match attr.as_slice() {
                b"lib-name" => true,
                b"lib-ver" => false,
                _ => {
                    return Some(error(format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&a[0])
                    )))
                }
            };
            if !valid_name(&a[1]) {
                return Some(error(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(&attr)
                )));
            }
            ask(ClientAsk::SetInfo(lib_name, a[1].clone()))
        }
        ("list", 0) => ask(ClientAsk::List(None)),
        ("list", _) => client_list_filter(a),
        ("id" | "getname" | "info" | "setname" | "setinfo", _) => {
            arity_error(&format!("client|{sub}"))
        }
        _ => return None,
    })
}

/// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id...]`: every
/// RESP client is of type normal.
fn client_list_filter(a: &[Bytes]) -> Decoded {
    let opt = a[0].to_ascii_lowercase();
    match (opt.as_slice(), a.len()) {
        (b"type", 2) => match a[1].to_ascii_lowercase().as_slice() {
            b"normal" => Decoded::Now(Now::Node(Ask::Client(ClientAsk::List(None)))),
            b"master" | b"replica" | b"slave" | b"pubsub" => {
                Decoded::Now(Now::Node(Ask::Client(ClientAsk::List(Some(Vec::new())))))
            }
            _ => error(format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(&a[1])
            )),
        },
        (b"id", n) if n >= 2 => {
            let mut ids = Vec::with_capacity(n - 1);
            for id in &a[1..] {
                match crate::resp::command::parse_i64(id) {
                    Some(v) if v > 0 => ids.push(v as u64),
                    _ => return error("ERR Invalid client ID"),
                }
            }
            Decoded::Now(Now::Node(Ask::Client(ClientAsk::List(Some(ids)))))
        }
        _ => error("ERR syntax error"),
    }
}

/// Redis's refusal of a client name [`valid_name`] rejects.
pub const BAD_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// Redis's rule for client names and library facts: printable ASCII, no
/// spaces (an empty name clears it).
pub fn valid_name(b: &[u8]) -> bool {
    b.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

pub(super) fn client_run(node: &NodeShared, conn: &mut RespConn, ask: ClientAsk) -> Now {
    let clients = &node.resp_clients;
    match ask {
        ClientAsk::Id => Now::Integer(conn.id as i64),
        ClientAsk::SetName(name) => {
            conn.set_name(&name);
            Now::Simple("OK")
        }
        ClientAsk::GetName => match clients.get(conn.id) {
            Some(c) if !c.name.is_empty() => Now::Bulk(Bytes::from(c.name)),
            _ => Now::Value(Value::Null),
        },
        ClientAsk::SetInfo(lib_name, value) => {
            let value = String::from_utf8_lossy(&value).into_owned();
            clients.update(conn.id, |c| {
                if lib_name {
                    c.lib_name = value
                } else {
                    c.lib_ver = value
                }
            });
            Now::Simple("OK")
        }
        ClientAsk::Info => {
            conn.sync_proto();
            match clients.get(conn.id) {
                Some(c) => Now::Value(Value::Text(c.line(conn.id) + "\n")),
                None => Now::Error("ERR this connection is not registered".into()),
            }
        }
        ClientAsk::List(ids) => {
            conn.sync_proto();
            let mut text = String::new();
            for (id, c) in clients.all() {
                if ids.as_ref().is_none_or(|ids| ids.contains(&id)) {
                    text.push_str(&c.line(id));
                    text.push('\n');
                }
            }
            Now::Value(Value::Text(text))
        }
    }
}

/// The RESP clients of a node, for CLIENT LIST and INFO. Written on
/// connect, close and the CLIENT commands that change a client (rare next
/// to requests), read by CLIENT LIST and INFO: one mutex is plenty.
#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Client>>,
}

/// What CLIENT LIST shows of a client.
#[derive(Debug, Clone)]
pub struct Client {
    pub addr: Option<SocketAddr>,
    pub laddr: Option<SocketAddr>,
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
    pub resp: u8,
    pub since: Instant,
}

impl Client {
    /// Its CLIENT LIST line: the fields Rush knows, in Redis's words.
    fn line(&self, id: u64) -> String {
        let addr = |a: Option<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
        format!(
            "id={id} addr={} laddr={} name={} age={} db=0 flags=N resp={} lib-name={} lib-ver={}",
            addr(self.addr),
            addr(self.laddr),
            self.name,
            self.since.elapsed().as_secs(),
            self.resp,
            self.lib_name,
            self.lib_ver
        )
    }
}

impl Clients {
    /// A new client: its id (unique on this node, from 1).
    pub fn open(&self, addr: Option<SocketAddr>, laddr: Option<SocketAddr>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let client = Client {
            addr,
            laddr,
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            resp: 2,
            since: Instant::now(),
        };
        self.lock().insert(id, client);
        id
    }

    pub fn close(&self, id: u64) {
        self.lock().remove(&id);
    }

    pub fn update(&self, id: u64, f: impl FnOnce(&mut Client)) {
        if let Some(c) = self.lock().get_mut(&id) {
            f(c)
        }
    }

    pub fn get(&self, id: u64) -> Option<Client> {
        self.lock().get(&id).cloned()
    }

    pub fn all(&self) -> Vec<(u64, Client)> {
        self.lock().iter().map(|(&id, c)| (id, c.clone())).collect()
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// The map stays consistent whatever panicked while holding it (each
    /// change is one insert, remove or field write).
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Client>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}
