//! A RESP reply as a value, for the answers the listener builds itself
//! (COMMAND, INFO, CLUSTER, CLIENT, CONFIG): built when the command is
//! read, written when its turn comes, in the protocol version in effect
//! then (a HELLO before it may switch it).

use bytes::{BufMut, Bytes, BytesMut};
use rush_protocol::resp::write;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`.
    Simple(&'static str),
    /// A status string built at run time (COMMAND's flags).
    Status(String),
    Bulk(Bytes),
    /// Text meant for people (INFO, CLUSTER NODES, CLIENT LIST): a bulk
    /// string in RESP2, a verbatim string (`=`, format `txt`) in RESP3, as
    /// Redis answers.
    Text(String),
    Integer(i64),
    Null,
    Array(Vec<Value>),
    /// An array in RESP2, a set (`~`) in RESP3 (COMMAND's flags).
    Set(Vec<Value>),
    /// A flat array of key, value... in RESP2, a map (`%`) in RESP3.
    Map(Vec<(Value, Value)>),
}

impl Value {
    pub fn bulk(s: impl Into<String>) -> Value {
        Value::Bulk(Bytes::from(s.into()))
    }

    pub fn write(&self, out: &mut BytesMut, resp3: bool) {
        match self {
            Value::Simple(s) => write::simple(out, s),
            Value::Status(s) => write::simple(out, s),
            Value::Bulk(b) => write::bulk(out, b),
            Value::Text(t) if resp3 => {
                out.put_u8(b'=');
                out.put_slice((t.len() + 4).to_string().as_bytes());
                out.put_slice(b"\r\ntxt:");
                out.put_slice(t.as_bytes());
                out.put_slice(b"\r\n");
            }
            Value::Text(t) => write::bulk(out, t.as_bytes()),
            Value::Integer(n) => write::integer(out, *n),
            Value::Null => write::null(out, resp3),
            Value::Array(items) => {
                write::array(out, items.len());
                items.iter().for_each(|v| v.write(out, resp3));
            }
            Value::Set(items) => {
                if resp3 {
                    out.put_u8(b'~');
                    out.put_slice(items.len().to_string().as_bytes());
                    out.put_slice(b"\r\n");
                } else {
                    write::array(out, items.len());
                }
                items.iter().for_each(|v| v.write(out, resp3));
            }
            Value::Map(pairs) => {
                write::map(out, pairs.len(), resp3);
                for (k, v) in pairs {
                    k.write(out, resp3);
                    v.write(out, resp3);
                }
            }
        }
    }

    /// About how many bytes it takes on the wire (what it holds while it
    /// waits for its turn).
    pub fn estimate(&self) -> usize {
        match self {
            Value::Simple(s) => s.len() + 3,
            Value::Status(s) => s.len() + 3,
            Value::Bulk(b) => b.len() + 16,
            Value::Text(t) => t.len() + 20,
            Value::Integer(_) | Value::Null => 16,
            Value::Array(items) | Value::Set(items) => {
                16 + items.iter().map(Value::estimate).sum::<usize>()
            }
            Value::Map(pairs) => {
                16 + pairs
                    .iter()
                    .map(|(k, v)| k.estimate() + v.estimate())
                    .sum::<usize>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(v: &Value, resp3: bool) -> String {
        let mut out = BytesMut::new();
        v.write(&mut out, resp3);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn each_kind_in_both_versions() {
        let t = Value::Text("a:1\r\n".into());
        assert_eq!(wire(&t, false), "$5\r\na:1\r\n\r\n");
        assert_eq!(wire(&t, true), "=9\r\ntxt:a:1\r\n\r\n");
        let s = Value::Set(vec![Value::Simple("write")]);
        assert_eq!(wire(&s, false), "*1\r\n+write\r\n");
        assert_eq!(wire(&s, true), "~1\r\n+write\r\n");
        let m = Value::Map(vec![(Value::bulk("k"), Value::Integer(1))]);
        assert_eq!(wire(&m, false), "*2\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(wire(&m, true), "%1\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(wire(&Value::Null, false), "$-1\r\n");
        assert!(m.estimate() >= wire(&m, true).len());
    }
}
