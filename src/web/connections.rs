//! The page's connections, each a task on one current-thread tokio runtime
//! (the `web` thread), every dimension bounded whoever connects (issue 24):
//! - at most [`MAX_CONNECTIONS`] at once, without a thread each. At the cap,
//!   the oldest connection that is between requests (idle, or still sending
//!   its request's head) is closed for the new one; with none, the new one
//!   waits in the OS's queue until one ends;
//! - a request's head is read with a deadline ([`HEAD_DEADLINE`], which is also
//!   how long an idle connection is kept) and a size cap as it comes
//!   ([`MAX_HEAD_BUFFER`]: a header line that never ends gets 431 at that
//!   size, it is never buffered whole): hyper's HTTP/1 connection;
//! - a request is answered within [`REQUEST_DEADLINE`], its body included
//!   (`tokio::time::timeout` around the service; 408 otherwise, and the
//!   connection is closed);
//! - a write that makes no progress for [`WRITE_DEADLINE`] (a client that
//!   stopped reading: the socket's buffers are full) closes the connection;
//! - a stop never waits on any of them: the runtime is dropped with its
//!   tasks, their sockets closed.

use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use log::debug;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use super::{lock, server, Shared, MAX_HEADER_BYTES, STOP_WAIT};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send a request's head, and how long an idle
/// connection is kept.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(10);
/// The most a request's head may take in the read buffer: twice what the
/// checks accept ([`MAX_HEADER_BYTES`]), so that they, not the buffer, say
/// 431 for what is in between. hyper's minimum is 8 KiB.
pub const MAX_HEAD_BUFFER: usize = 2 * MAX_HEADER_BYTES;
/// How long a request (its body included) may take to be answered.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// How long a write may make no progress before the connection is closed: a
/// page that stopped reading its event stream loses it.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(3);
/// How long the accept loop rests after an error (out of file descriptors):
/// it never spins.
const ACCEPT_REST: Duration = Duration::from_millis(100);

/// The runtime the `web` thread runs: one thread (the requests that wait on
/// a file or on the relay run from the page's own queue, [`super::work`]).
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
}

/// Serves `listener` on `runtime` until `stop` is notified, then drops every
/// connection (waiting at most [`STOP_WAIT`]).
pub fn serve(
    runtime: tokio::runtime::Runtime,
    listener: std::net::TcpListener,
    shared: &Arc<Shared>,
    stop: &Notify,
) {
    runtime.block_on(async {
        let listener = match listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
        {
            Ok(l) => l,
            Err(e) => {
                log::warn!("no web page: cannot serve it: {e}");
                return;
            }
        };
        tokio::select! {
            () = accept(listener, shared.clone()) => {}
            () = stop.notified() => {}
        }
    });
    runtime.shutdown_timeout(STOP_WAIT);
}

/// One open connection, as the accept loop sees it.
#[derive(Default)]
struct Open {
    /// Requests being answered on it (their responses not yet all written).
    requests: AtomicUsize,
    /// Set when it is chosen to close for a new one.
    closing: AtomicBool,
    close: Notify,
}

impl Open {
    fn idle(&self) -> bool {
        self.requests.load(Ordering::Acquire) == 0 && !self.closing.load(Ordering::Acquire)
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct Table {
    open: Mutex<Vec<Arc<Open>>>,
}

impl Table {
    /// Closes the oldest connection between requests; false when none is.
    fn close_oldest_idle(&self) -> bool {
        let open = lock(&self.open);
        match open.iter().find(|c| c.idle()) {
            Some(c) => {
                c.closing.store(true, Ordering::Release);
                c.close.notify_one();
                true
            }
            None => false,
        }
    }

    fn add(&self) -> Arc<Open> {
        let c = Arc::new(Open::default());
        lock(&self.open).push(c.clone());
        c
    }

    fn remove(&self, c: &Arc<Open>) {
        lock(&self.open).retain(|o| !Arc::ptr_eq(o, c));
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let table = Arc::new(Table::default());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_DEADLINE)
        .max_buf_size(MAX_HEAD_BUFFER)
        .keep_alive(true);
    let router = server::router(shared.clone());
    loop {
        let Some(permit) = slot(&slots, &table).await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                debug!("web page: accept failed: {e}");
                tokio::time::sleep(ACCEPT_REST).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let open = table.add();
        tokio::spawn(connection(
            stream,
            peer,
            open,
            table.clone(),
            permit,
            http.clone(),
            router.clone(),
        ));
    }
}

/// A connection's place: free, or made by closing the oldest idle connection;
/// with every connection being answered, the first to end (checked again every
/// [`ACCEPT_REST`], for one that became idle).
async fn slot(slots: &Arc<Semaphore>, table: &Table) -> Option<OwnedSemaphorePermit> {
    loop {
        if let Ok(p) = slots.clone().try_acquire_owned() {
            return Some(p);
        }
        if table.close_oldest_idle() {
            return slots.clone().acquire_owned().await.ok();
        }
        tokio::select! {
            p = slots.clone().acquire_owned() => return p.ok(),
            () = tokio::time::sleep(ACCEPT_REST) => {}
        }
    }
}

/// Who sent a request: the connection's peer, for the checks.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    open: Arc<Open>,
    table: Arc<Table>,
    _permit: OwnedSemaphorePermit,
    http: hyper::server::conn::http1::Builder,
    router: axum::Router,
) {
    let service = {
        let open = open.clone();
        hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(Peer(peer));
            let busy = Busy::new(open.clone());
            let mut router = router.clone();
            async move {
                let response = tower::Service::call(&mut router, request).await;
                response.map(|r| r.map(|body| Tracked { body, _busy: busy }))
            }
        })
    };
    let io = TokioIo::new(Deadlined::new(stream, WRITE_DEADLINE));
    tokio::select! {
        served = http.serve_connection(io, service) => {
            if let Err(e) = served {
                debug!("web page: a connection from {peer} ended: {e}");
            }
        }
        () = open.close.notified() => {
            debug!("web page: closed an idle connection from {peer} for a new one");
        }
    }
    table.remove(&open);
}

/// Counts one request on its connection until its response is written.
struct Busy(Arc<Open>);

impl Busy {
    fn new(open: Arc<Open>) -> Busy {
        open.requests.fetch_add(1, Ordering::AcqRel);
        Busy(open)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.requests.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its connection counted busy until hyper has
/// written (or dropped) it.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A TCP stream whose writes fail when they make no progress for a while.
struct Deadlined {
    stream: TcpStream,
    deadline: Duration,
    /// Running while a write waits for room.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl Deadlined {
    fn new(stream: TcpStream, deadline: Duration) -> Deadlined {
        Deadlined {
            stream,
            deadline,
            stalled: None,
        }
    }

    /// `Pending` from a write starts the clock (or checks it); anything else
    /// stops it.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let deadline = self.deadline;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(deadline)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Deadlined {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Deadlined {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_flush(cx);
        self.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.watch(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_idle_connection_is_the_one_closed() {
        let table = Table::default();
        let (a, b, c) = (table.add(), table.add(), table.add());
        let _answering = Busy::new(a.clone());
        assert!(table.close_oldest_idle());
        assert!(!a.closing.load(Ordering::Acquire), "a is being answered");
        assert!(
            b.closing.load(Ordering::Acquire),
            "b is the oldest idle one"
        );
        assert!(table.close_oldest_idle());
        assert!(c.closing.load(Ordering::Acquire));
        assert!(!table.close_oldest_idle(), "none idle is left");
        table.remove(&b);
        assert_eq!(lock(&table.open).len(), 2);
    }

    #[test]
    fn a_write_to_a_client_that_stopped_reading_fails_after_the_deadline() {
        let runtime = runtime().unwrap();
        runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let client = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let mut out = Deadlined::new(server, Duration::from_millis(200));
            let chunk = vec![0u8; 64 << 10];
            let mut written = 0usize;
            // The client never reads: the buffers fill, then the deadline ends it.
            let error = loop {
                let wrote =
                    std::future::poll_fn(|cx| Pin::new(&mut out).poll_write(cx, &chunk)).await;
                match wrote {
                    Ok(n) => written += n,
                    Err(e) => break e,
                }
                assert!(
                    written < 1 << 30,
                    "a gigabyte went into a client that reads nothing"
                );
            };
            assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
            drop(client);
        });
    }
}
