//! One HTTP session as an ordinary broker session: the same `Session` the shim's connections
//! get runs over an in-memory pipe. Requests POSTed to the front are written into it as lines;
//! its output is read line by line, each response handed to the POST waiting for its id, and
//! everything else (notifications, the server's own requests) to the session's GET stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use mcpb_protocol::FrameReader;
use mcpb_protocol::message::{Incoming, IncomingKind, id_key};
use parking_lot::Mutex;
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};

use crate::broker::Broker;
use crate::session::{Session, SessionIo};

/// Lines in flight inside one session's pipe.
const PIPE: usize = 1 << 20;

pub(crate) struct Bridge {
    pub(crate) token: usize,
    input: tokio::sync::Mutex<WriteHalf<DuplexStream>>,
    waiters: Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>,
    /// The session's GET stream, when one is open: SSE frames.
    stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    pub(crate) last_used: Mutex<Instant>,
    /// Held for the session's life: a client slot, and the token's session count for a
    /// session that outlives its request.
    _permits: Vec<OwnedSemaphorePermit>,
}

/// An SSE event carrying one JSON-RPC message.
pub(crate) fn sse_event(line: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(line);
    Bytes::from(format!("event: message\ndata: {}\n\n", text.trim_end()))
}

impl Bridge {
    /// Starts a session of `profile`; `ended` is called when it is over.
    pub(crate) fn start(
        broker: Arc<Broker>,
        profile: mcpb_config::ProfileSettings,
        token: usize,
        permits: Vec<OwnedSemaphorePermit>,
        mut shutdown: watch::Receiver<bool>,
        ended: impl FnOnce() + Send + 'static,
    ) -> Arc<Self> {
        let (ours, theirs) = tokio::io::duplex(PIPE);
        let (their_read, their_write) = tokio::io::split(theirs);
        let (our_read, our_write) = tokio::io::split(ours);
        let bridge = Arc::new(Self {
            token,
            input: tokio::sync::Mutex::new(our_write),
            waiters: Mutex::default(),
            stream: Mutex::default(),
            last_used: Mutex::new(Instant::now()),
            _permits: permits,
        });
        let io = SessionIo {
            reader: Box::pin(their_read),
            writer: Box::pin(their_write),
            control: None,
        };
        let max_frame = broker.config().settings.broker.max_frame_bytes;
        let session_broker = broker.clone();
        tokio::spawn(async move {
            session_broker
                .sessions
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut session = Session::new(session_broker.clone(), Arc::new(profile), true, false);
            session.run(io, &mut shutdown).await;
            session_broker
                .sessions
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            ended();
        });
        let pump = bridge.clone();
        tokio::spawn(async move {
            let mut frames =
                FrameReader::new(BufReader::new(our_read), max_frame.saturating_mul(2));
            while let Ok(Some(line)) = frames.next_frame().await {
                pump.route(line);
            }
            // The session is over: whoever still waits gets nothing more.
            pump.waiters.lock().clear();
            pump.stream.lock().take();
        });
        bridge
    }

    /// A line the session wrote: a response to its POST, anything else to the GET stream.
    fn route(&self, line: &[u8]) {
        let mut owned = line.to_vec();
        owned.push(b'\n');
        if let Ok(msg) = Incoming::parse(line)
            && msg.kind() == IncomingKind::Response
            && let Some(id) = msg.id
            && let Some(waiter) = self.waiters.lock().remove(&id_key(id.get()))
        {
            let _ = waiter.send(owned);
            return;
        }
        let stream = self.stream.lock().clone();
        match stream {
            // A client that does not read its stream loses notifications, never the session.
            Some(tx) => {
                let _ = tx.try_send(sse_event(&owned));
            }
            None => tracing::debug!("HTTP session has no stream open; a notification was dropped"),
        }
    }

    /// Sends a request and returns its answer; None when the session ended first.
    pub(crate) async fn request(&self, id: &str, line: &[u8]) -> Option<Vec<u8>> {
        let key = id_key(id);
        let (tx, rx) = oneshot::channel();
        {
            let mut waiters = self.waiters.lock();
            // Two requests in flight under one id cannot both be answered.
            if waiters.contains_key(&key) {
                return None;
            }
            waiters.insert(key.clone(), tx);
        }
        // Whatever ends the wait (an answer, the client leaving), the entry goes.
        struct Forget<'a>(&'a Bridge, String);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.waiters.lock().remove(&self.1);
            }
        }
        let _forget = Forget(self, key);
        if !self.send(line).await {
            return None;
        }
        rx.await.ok()
    }

    /// Writes one message into the session; false once it has ended.
    pub(crate) async fn send(&self, line: &[u8]) -> bool {
        *self.last_used.lock() = Instant::now();
        let mut input = self.input.lock().await;
        input.write_all(line).await.is_ok() && input.write_all(b"\n").await.is_ok()
    }

    /// Opens the session's GET stream (a new one replaces the old).
    pub(crate) fn open_stream(&self) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(256);
        *self.stream.lock() = Some(tx);
        rx
    }

    pub(crate) fn has_stream(&self) -> bool {
        self.stream.lock().as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Ends the session: its input closes, the session sees the end of its client.
    pub(crate) async fn close(&self) {
        let _ = self.input.lock().await.shutdown().await;
        self.stream.lock().take();
    }
}
