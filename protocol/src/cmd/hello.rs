use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_TEXT;
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `HELLO version [token] client-name`: the first request on a connection.
/// When the node requires a token, every other request before a successful
/// HELLO answers UNAUTHORIZED.
#[derive(Clone, PartialEq, Eq)]
pub struct Hello {
    pub version: u8,
    pub token: Option<String>,
    pub client: String,
}

// Hand-written so a token never reaches a log line through `{:?}`.
impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hello")
            .field("version", &self.version)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("client", &self.client)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloReply {
    /// The protocol version the server speaks.
    pub protocol: u8,
    /// The server's software version.
    pub server: String,
    pub node_id: String,
    pub shards: u16,
    /// True when this connection may send admin requests.
    pub admin: bool,
}

impl Hello {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for Hello {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.version);
        match &self.token {
            None => out.put_u8(0),
            Some(t) => {
                out.put_u8(1);
                out.put_lp(t.as_bytes());
            }
        }
        out.put_lp(self.client.as_bytes());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Hello {
            version: r.u8("version")?,
            token: r.option("token", |r| r.string("token", MAX_TEXT))?,
            client: r.string("client", MAX_TEXT)?,
        })
    }
}

impl Wire for HelloReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.protocol);
        out.put_lp(self.server.as_bytes());
        out.put_lp(self.node_id.as_bytes());
        out.put_u16(self.shards);
        out.put_bool(self.admin);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HelloReply {
            protocol: r.u8("protocol")?,
            server: r.string("server", MAX_TEXT)?,
            node_id: r.string("node id", MAX_TEXT)?,
            shards: r.u16("shards")?,
            admin: r.bool("admin")?,
        })
    }
}
