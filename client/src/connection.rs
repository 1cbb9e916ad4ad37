//! One multiplexed connection: many requests in flight, answers matched by
//! request id in whatever order they arrive.

use crate::error::ClientError;
use bytes::{Bytes, BytesMut};
use rush_protocol::frame::{self, Frame, Header};
use rush_protocol::limits::MAX_FRAME_CEILING;
use rush_protocol::{Command, RushError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

/// TLS settings for a connection: the verifier (trusted roots) and the name
/// the server's certificate must carry.
#[derive(Clone)]
pub struct Tls {
    pub connector: tokio_rustls::TlsConnector,
    pub server_name: rustls::pki_types::ServerName<'static>,
}

impl Tls {
    /// Trust the CA certificates in a PEM file; expect `server_name`.
    pub fn from_ca_file(ca_file: &std::path::Path, server_name: &str) -> Result<Tls, ClientError> {
        use rustls::pki_types::pem::PemObject;
        let bad = |m: String| ClientError::Connect {
            addr: server_name.to_string(),
            message: m,
            transient: false,
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_file)
            .map_err(|e| bad(format!("reading {}: {e}", ca_file.display())))?
        {
            let cert = cert.map_err(|e| bad(format!("reading {}: {e}", ca_file.display())))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("CA certificate: {e}")))?;
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let server_name = rustls::pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|e| bad(format!("server name {server_name:?}: {e}")))?;
        Ok(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<Result<Frame, ClientError>>>>;

struct Inner {
    tx: mpsc::UnboundedSender<Bytes>,
    pending: Pending,
    next_id: AtomicU64,
    closed: AtomicBool,
    /// Why the connection closed, for calls that find it closed.
    close_reason: Mutex<Option<ClientError>>,
}

/// A cheap-to-clone handle to one TCP connection. The socket closes when the
/// last handle is dropped (the I/O tasks watch `_open`).
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
    _open: Arc<watch::Sender<()>>,
}

impl Connection {
    pub async fn connect(addr: &str, timeout: Duration) -> Result<Connection, ClientError> {
        Self::connect_tls(addr, timeout, None).await
    }

    /// Connect, over TLS when `tls` is given.
    pub async fn connect_tls(
        addr: &str,
        timeout: Duration,
        tls: Option<&Tls>,
    ) -> Result<Connection, ClientError> {
        let err = |message: String, transient: bool| ClientError::Connect {
            addr: addr.to_string(),
            message,
            transient,
        };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| err(format!("timed out after {timeout:?}"), true))?
            .map_err(|e| err(e.to_string(), true))?;
        let _ = stream.set_nodelay(true);
        match tls {
            None => {
                let (rd, wr) = stream.into_split();
                Ok(Self::start(addr, rd, wr))
            }
            Some(tls) => {
                let stream = tokio::time::timeout(
                    timeout,
                    tls.connector.connect(tls.server_name.clone(), stream),
                )
                .await
                .map_err(|_| err(format!("TLS handshake timed out after {timeout:?}"), true))?
                .map_err(|e| err(format!("TLS handshake: {e}"), !refused_by_tls(&e)))?;
                let (rd, wr) = tokio::io::split(stream);
                Ok(Self::start(addr, rd, wr))
            }
        }
    }

    fn start<R, W>(addr: &str, rd: R, wr: W) -> Connection
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            tx,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
        });
        let (open, handles) = watch::channel(());
        tokio::spawn(write_loop(wr, rx, inner.clone(), handles.clone()));
        tokio::spawn(read_loop(rd, addr.to_string(), inner.clone(), handles));
        Connection {
            inner,
            _open: Arc::new(open),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Send one request and wait for its answer.
    pub async fn call<C: Command>(
        &self,
        cmd: &C,
        timeout: Duration,
    ) -> Result<C::Reply, ClientError> {
        let mut buf = BytesMut::new();
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        frame::encode(&mut buf, Header::request(C::OPCODE.as_u8(), id), |b| {
            cmd.encode(b)
        });
        let frame = self.round_trip(id, buf.freeze(), timeout).await?;
        match frame::decode_response::<C::Reply>(frame.body) {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(ClientError::Server(e)),
            Err(e) => Err(ClientError::Protocol(format!(
                "{} answer: {e}",
                C::OPCODE.name()
            ))),
        }
    }

    async fn round_trip(
        &self,
        id: u64,
        bytes: Bytes,
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.inner
            .pending
            .lock()
            .expect("not poisoned")
            .insert(id, tx);
        if self.is_closed() || self.inner.tx.send(bytes).is_err() {
            self.inner.pending.lock().expect("not poisoned").remove(&id);
            return Err(self.close_error());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(self.close_error()),
            Err(_) => {
                self.inner.pending.lock().expect("not poisoned").remove(&id);
                Err(ClientError::Timeout(timeout))
            }
        }
    }

    fn close_error(&self) -> ClientError {
        self.inner
            .close_reason
            .lock()
            .expect("not poisoned")
            .clone()
            .unwrap_or_else(|| ClientError::ConnectionLost("connection closed".into()))
    }
}

fn close(inner: &Inner, reason: ClientError) {
    {
        let mut r = inner.close_reason.lock().expect("not poisoned");
        if r.is_none() {
            *r = Some(reason.clone());
        }
    }
    inner.closed.store(true, Ordering::SeqCst);
    let pending: Vec<_> = inner
        .pending
        .lock()
        .expect("not poisoned")
        .drain()
        .collect();
    let reason = inner
        .close_reason
        .lock()
        .expect("not poisoned")
        .clone()
        .unwrap_or(reason);
    for (_, tx) in pending {
        let _ = tx.send(Err(reason.clone()));
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    inner: Arc<Inner>,
    mut handles: watch::Receiver<()>,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let first = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => return,
            },
            // Every handle is gone: nobody can send or wait any more.
            _ = handles.changed() => {
                let _ = wr.shutdown().await;
                return;
            }
        };
        buf.extend_from_slice(&first);
        while buf.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(b) => buf.extend_from_slice(&b),
                Err(_) => break,
            }
        }
        if let Err(e) = wr.write_all(&buf).await {
            close(&inner, ClientError::ConnectionLost(format!("write: {e}")));
            return;
        }
        buf.clear();
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut rd: R,
    addr: String,
    inner: Arc<Inner>,
    mut handles: watch::Receiver<()>,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            match frame::parse(&mut buf, MAX_FRAME_CEILING) {
                Ok(Some(f)) => deliver(&inner, f),
                Ok(None) => break,
                Err(e) => {
                    close(&inner, ClientError::Protocol(bad_frame(&addr, &buf, e)));
                    return;
                }
            }
        }
        let read = tokio::select! {
            r = rd.read_buf(&mut buf) => r,
            _ = handles.changed() => {
                close(&inner, ClientError::ConnectionLost("connection dropped".into()));
                return;
            }
        };
        match read {
            Ok(0) => {
                close(
                    &inner,
                    ClientError::ConnectionLost("closed by server".into()),
                );
                return;
            }
            Ok(_) => {}
            Err(e) => {
                close(&inner, ClientError::ConnectionLost(format!("read: {e}")));
                return;
            }
        }
    }
}

/// Whether a failed handshake is TLS saying no — a certificate it can't
/// trust, a peer that doesn't speak TLS — rather than the connection
/// breaking under it (a node shutting down): tokio-rustls hands rustls's
/// own errors back inside the `io::Error`, and trying again can't change
/// their outcome.
fn refused_by_tls(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
}

/// Why the bytes from `addr` are not frames. An HTTP server (rushd's own
/// HTTP or redirect listener, given by mistake) answers our HELLO with
/// `HTTP/1.1 400 …`, whose first four bytes read as a frame length of
/// 1.2 GB: say what the address is instead.
fn bad_frame(addr: &str, buf: &[u8], e: impl std::fmt::Display) -> String {
    if buf.starts_with(b"HTTP") {
        format!(
            "that address speaks HTTP; the protocol port is {} unless the node's server.listen \
             says otherwise ({addr} answered in HTTP: rushd's HTTP or redirect listener, or \
             another web server)",
            crate::DEFAULT_PORT
        )
    } else {
        format!("bad frame from {addr}: {e}")
    }
}

fn deliver(inner: &Inner, f: Frame) {
    let id = f.header.request_id;
    let waiter = inner.pending.lock().expect("not poisoned").remove(&id);
    match waiter {
        Some(tx) => {
            let _ = tx.send(Ok(f));
        }
        // Request id 0 is the server speaking about the connection itself
        // (too many connections, a frame it refused): remember why.
        None if id == 0 => {
            if let Ok(Err(e)) = frame::decode_response::<()>(f.body) {
                let e: RushError = e;
                *inner.close_reason.lock().expect("not poisoned") = Some(ClientError::Server(e));
            }
        }
        // An answer to a call that timed out: nobody waits for it any more.
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// TLS that trusts nothing: enough to see how a handshake fails.
    fn tls() -> Tls {
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name: rustls::pki_types::ServerName::try_from("localhost").unwrap(),
        }
    }

    /// A listener that answers each connection with `answer`, then closes it.
    async fn server(answer: &'static [u8]) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut hello = [0u8; 512];
                let _ = s.read(&mut hello).await;
                let _ = s.write_all(answer).await;
            }
        });
        addr
    }

    fn transient(r: Result<Connection, ClientError>) -> bool {
        match r {
            Err(ClientError::Connect { transient, .. }) => transient,
            Err(e) => panic!("not a connect error: {e}"),
            Ok(_) => panic!("connected"),
        }
    }

    #[tokio::test]
    async fn what_a_retry_may_cure() {
        let t = Duration::from_secs(5);
        // A server that doesn't speak TLS: it answers, but no retry helps.
        let http = server(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        assert!(!transient(
            Connection::connect_tls(&http, t, Some(&tls())).await
        ));
        // A server that closes during the handshake (a node shutting down).
        let gone = server(b"").await;
        assert!(transient(
            Connection::connect_tls(&gone, t, Some(&tls())).await
        ));
        // Nothing listening.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed_addr = closed.local_addr().unwrap().to_string();
        drop(closed);
        assert!(transient(Connection::connect(&closed_addr, t).await));
        // An unreadable CA file is a setting to fix.
        let e = Tls::from_ca_file(std::path::Path::new("/nonexistent/ca.pem"), "localhost");
        assert!(matches!(
            e,
            Err(ClientError::Connect {
                transient: false,
                ..
            })
        ));
    }
}
