//! One multiplexed connection: many requests in flight, answers matched by
//! request id in whatever order they arrive.

use crate::error::ClientError;
use bytes::BytesMut;
use rush_protocol::frame::{self, Frame, Header};
use rush_protocol::limits::MAX_FRAME_CEILING;
use rush_protocol::{Command, RushError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch, Notify};

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

/// A call waiting for its answer.
struct Waiter {
    tx: oneshot::Sender<Result<Frame, ClientError>>,
    /// When the call gives up, in nanoseconds since [`Inner::epoch`].
    deadline: u64,
    timeout: Duration,
}

type Pending = Mutex<HashMap<u64, Waiter>>;

struct Inner {
    /// Frames callers have encoded for the write task, which takes them all
    /// at once: no allocation or channel message per request.
    out: Mutex<BytesMut>,
    /// Wakes the write task when `out` stops being empty.
    out_ready: Notify,
    pending: Pending,
    next_id: AtomicU64,
    closed: AtomicBool,
    /// Why the connection closed, for calls that find it closed.
    close_reason: Mutex<Option<ClientError>>,
    /// Calls' deadlines are measured from here.
    epoch: Instant,
    /// When the timeout task next looks at the pending calls (nanoseconds
    /// since `epoch`; `u64::MAX` while none is pending). Written under the
    /// `pending` lock.
    sweep_at: AtomicU64,
    /// Wakes the timeout task for a call due before `sweep_at`.
    sweep_now: Notify,
}

impl Inner {
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
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
        let inner = Arc::new(Inner {
            out: Mutex::new(BytesMut::with_capacity(WRITE_BUFFER)),
            out_ready: Notify::new(),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            epoch: Instant::now(),
            sweep_at: AtomicU64::new(u64::MAX),
            sweep_now: Notify::new(),
        });
        let (open, handles) = watch::channel(());
        tokio::spawn(write_loop(wr, inner.clone(), handles.clone()));
        tokio::spawn(read_loop(
            rd,
            addr.to_string(),
            inner.clone(),
            handles.clone(),
        ));
        tokio::spawn(timeout_loop(inner.clone(), handles));
        Connection {
            inner,
            _open: Arc::new(open),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Send one request and wait for its answer, at most `timeout`.
    pub async fn call<C: Command>(
        &self,
        cmd: &C,
        timeout: Duration,
    ) -> Result<C::Reply, ClientError> {
        let inner = &*self.inner;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let deadline = inner
            .nanos(Instant::now())
            .saturating_add(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
        inner.pending.lock().expect("not poisoned").insert(
            id,
            Waiter {
                tx,
                deadline,
                timeout,
            },
        );
        // `close` marks the connection closed before it fails the pending
        // calls: a call it missed sees the mark here.
        if self.is_closed() {
            inner.pending.lock().expect("not poisoned").remove(&id);
            return Err(self.close_error());
        }
        {
            let mut out = inner.out.lock().expect("not poisoned");
            let was_empty = out.is_empty();
            frame::encode(&mut out, Header::request(C::OPCODE.as_u8(), id), |b| {
                cmd.encode(b)
            });
            drop(out);
            if was_empty {
                inner.out_ready.notify_one();
            }
        }
        // The timeout task sleeps until the earliest deadline it knows of;
        // wake it only for one before that (with one timeout for every call,
        // never while calls are in flight).
        if deadline < inner.sweep_at.load(Ordering::Acquire) {
            inner.sweep_now.notify_one();
        }
        let frame = match rx.await {
            Ok(r) => r?,
            Err(_) => return Err(self.close_error()),
        };
        match frame::decode_response::<C::Reply>(frame.body) {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(ClientError::Server(e)),
            Err(e) => Err(ClientError::Protocol(format!(
                "{} answer: {e}",
                C::OPCODE.name()
            ))),
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

/// The write buffer's starting size, and the most it keeps between writes.
const WRITE_BUFFER: usize = 64 * 1024;
const WRITE_BUFFER_KEPT: usize = 1 << 20;

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
    for (_, w) in pending {
        let _ = w.tx.send(Err(reason.clone()));
    }
}

/// Write what callers have encoded, all of it in one write each time.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    inner: Arc<Inner>,
    mut handles: watch::Receiver<()>,
) {
    let mut buf = BytesMut::with_capacity(WRITE_BUFFER);
    loop {
        tokio::select! {
            _ = inner.out_ready.notified() => {}
            // Every handle is gone: nobody can send or wait any more.
            _ = handles.changed() => {
                let _ = wr.shutdown().await;
                return;
            }
        }
        // Callers go on encoding into the buffer this one wrote last time.
        std::mem::swap(&mut *inner.out.lock().expect("not poisoned"), &mut buf);
        if buf.is_empty() {
            continue;
        }
        if let Err(e) = wr.write_all(&buf).await {
            close(&inner, ClientError::ConnectionLost(format!("write: {e}")));
            return;
        }
        buf.clear();
        if buf.capacity() > WRITE_BUFFER_KEPT {
            buf = BytesMut::with_capacity(WRITE_BUFFER);
        }
    }
}

/// Fail the calls whose time is up. One task per connection instead of a
/// timer per call: it sleeps until the earliest deadline pending, so with
/// calls answered in time it wakes about once per timeout.
async fn timeout_loop(inner: Arc<Inner>, mut handles: watch::Receiver<()>) {
    loop {
        let now = inner.nanos(Instant::now());
        let (expired, next) = {
            let mut pending = inner.pending.lock().expect("not poisoned");
            let expired: Vec<Waiter> = pending
                .extract_if(|_, w| w.deadline <= now)
                .map(|(_, w)| w)
                .collect();
            let next = pending.values().map(|w| w.deadline).min();
            // Under the lock, so that a call registered after it reads this.
            inner
                .sweep_at
                .store(next.unwrap_or(u64::MAX), Ordering::Release);
            (expired, next)
        };
        for w in expired {
            let _ = w.tx.send(Err(ClientError::Timeout(w.timeout)));
        }
        let due = async {
            match next {
                Some(at) => {
                    let at = inner
                        .epoch
                        .checked_add(Duration::from_nanos(at))
                        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
                    tokio::time::sleep_until(at.into()).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = due => {}
            _ = inner.sweep_now.notified() => {}
            _ = handles.changed() => return,
        }
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
        Some(w) => {
            let _ = w.tx.send(Ok(f));
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

    /// A listener that reads whatever it is sent and never answers.
    async fn silent() -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut sink = [0u8; 4096];
                    while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
                });
            }
        });
        addr
    }

    /// Calls that get no answer fail with their own timeout, each when it
    /// is due: a short one behind a long one is not held to the long one's.
    #[tokio::test]
    async fn unanswered_calls_time_out_each_on_time() {
        // A timeout that never fires must fail the test, not hang it.
        tokio::time::timeout(Duration::from_secs(20), calls_time_out())
            .await
            .expect("the calls timed out within 20 s");
    }

    async fn calls_time_out() {
        let conn = Connection::connect(&silent().await, Duration::from_secs(5))
            .await
            .unwrap();
        let long = tokio::spawn({
            let conn = conn.clone();
            async move {
                conn.call(&rush_protocol::cmd::Ping::default(), Duration::from_secs(3))
                    .await
            }
        });
        // Let the long call be the deadline the timeout task sleeps for.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for short in [150, 100] {
            let short = Duration::from_millis(short);
            let started = Instant::now();
            let r = conn.call(&rush_protocol::cmd::Ping::default(), short).await;
            let took = started.elapsed();
            assert!(
                matches!(r, Err(ClientError::Timeout(t)) if t == short),
                "{r:?}"
            );
            assert!(took >= short, "gave up early: {took:?}");
            assert!(
                took < Duration::from_secs(2),
                "held to the long call's deadline: {took:?}"
            );
        }
        let started = Instant::now();
        let r = long.await.unwrap();
        assert!(
            matches!(r, Err(ClientError::Timeout(t)) if t == Duration::from_secs(3)),
            "{r:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(4));
        // Nothing is left waiting.
        assert!(conn.inner.pending.lock().unwrap().is_empty());
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
