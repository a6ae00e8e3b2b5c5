//! One HTTP session as an ordinary broker session: the same `Session` the shim's connections
//! get runs over an in-memory pipe. Requests POSTed to the front are written into it as lines;
//! its output is read line by line, each response handed to the POST waiting for its id, and
//! everything else (notifications, the server's own requests) to the session's GET stream.
//!
//! Each stream event carries an id, unique in the session; the last events are kept, so a
//! client whose stream broke reconnects with `Last-Event-ID` and misses nothing (what a slow
//! reader could not take is kept the same way). A response nobody waits for any more is
//! dropped, never put on the stream.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
/// Stream events kept for a client that reconnects: this many, in this many bytes at most.
const KEPT_EVENTS: usize = 512;
const KEPT_BYTES: usize = 4 << 20;
/// Events queued on an open stream beyond those replayed.
const STREAM_QUEUE: usize = 256;
/// Bytes queued on an open stream: past them, a reader that is behind gets no more live events
/// (they are kept for its reconnect), so a stalled reader costs the daemon this much at most.
const STREAM_BYTES: usize = 8 << 20;

/// The receiving end of a session's stream: what it takes off the queue frees room for more;
/// when it goes (the client left), the session's idle clock starts again.
pub(crate) struct StreamRx {
    rx: mpsc::Receiver<Bytes>,
    queued: Arc<AtomicUsize>,
    touched: Arc<Mutex<Instant>>,
}

impl StreamRx {
    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        let event = self.rx.recv().await?;
        self.queued.fetch_sub(event.len(), Ordering::SeqCst);
        Some(event)
    }
}

impl Drop for StreamRx {
    fn drop(&mut self) {
        *self.touched.lock() = Instant::now();
    }
}

/// The sending end: events, and the bytes of them not yet taken.
struct StreamTx {
    tx: mpsc::Sender<Bytes>,
    queued: Arc<AtomicUsize>,
}

impl StreamTx {
    /// Queues `event` unless the reader is too far behind (then it waits in the kept events).
    fn offer(&self, event: Bytes) {
        let len = event.len();
        if self.queued.load(Ordering::SeqCst) + len > STREAM_BYTES {
            return;
        }
        if self.tx.try_send(event).is_ok() {
            self.queued.fetch_add(len, Ordering::SeqCst);
        }
    }
}

/// The session's server-to-client events: the open stream, and the last events for a replay.
#[derive(Default)]
struct Outbound {
    last_id: u64,
    kept: VecDeque<(u64, Bytes)>,
    kept_bytes: usize,
    stream: Option<StreamTx>,
    /// A stream was opened once: the client reads the server's requests, if late.
    ever_opened: bool,
}

impl Outbound {
    fn push(&mut self, line: &[u8]) {
        self.last_id += 1;
        let event = sse_event(self.last_id, line);
        self.kept_bytes += event.len();
        self.kept.push_back((self.last_id, event.clone()));
        while self.kept.len() > KEPT_EVENTS || self.kept_bytes > KEPT_BYTES {
            match self.kept.pop_front() {
                Some((_, e)) => self.kept_bytes -= e.len(),
                None => break,
            }
        }
        if let Some(tx) = &self.stream {
            // A reader that is behind misses it live; a reconnect with its last id gets it.
            tx.offer(event);
        }
    }
}

pub(crate) struct Bridge {
    pub(crate) token: usize,
    input: tokio::sync::Mutex<WriteHalf<DuplexStream>>,
    waiters: Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>,
    outbound: Mutex<Outbound>,
    last_used: Arc<Mutex<Instant>>,
    /// Held for the session's life: a client slot, and the token's session count for a
    /// session that outlives its request.
    _permits: Vec<OwnedSemaphorePermit>,
}

/// An SSE event of one JSON-RPC message without an id (a POST's own answer: not replayed).
pub(crate) fn sse_message(line: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(line);
    Bytes::from(format!("event: message\ndata: {}\n\n", text.trim_end()))
}

/// An SSE event carrying one JSON-RPC message (one line: JSON never holds a raw newline).
fn sse_event(id: u64, line: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(line);
    Bytes::from(format!(
        "id: {id}\nevent: message\ndata: {}\n\n",
        text.trim_end()
    ))
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
            outbound: Mutex::default(),
            last_used: Arc::new(Mutex::new(Instant::now())),
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
                if let Some(refusal) = pump.route(line) {
                    let back = pump.clone();
                    tokio::spawn(async move { back.send(&refusal).await });
                }
            }
            // The session is over: whoever still waits gets nothing more.
            pump.waiters.lock().clear();
            pump.outbound.lock().stream.take();
        });
        bridge
    }

    /// A line the session wrote: a response to its POST, anything else to the GET stream.
    /// A request of the server's while the client never opened a stream is refused at once
    /// (the returned line goes back into the session) rather than left to time out.
    fn route(&self, line: &[u8]) -> Option<Vec<u8>> {
        let mut owned = line.to_vec();
        owned.push(b'\n');
        let msg = Incoming::parse(line).ok();
        let kind = msg.as_ref().map(Incoming::kind);
        if kind == Some(IncomingKind::Response) {
            let id = msg.as_ref().and_then(|m| m.id).map(|i| id_key(i.get()));
            match id.and_then(|id| self.waiters.lock().remove(&id)) {
                Some(waiter) => {
                    let _ = waiter.send(owned);
                }
                None => tracing::debug!("an HTTP answer nobody waits for was dropped"),
            }
            return None;
        }
        let mut out = self.outbound.lock();
        if kind == Some(IncomingKind::Request) && !out.ever_opened {
            let id = msg.as_ref().and_then(|m| m.id)?;
            let mut refusal = mcpb_protocol::message::error_line(
                Some(id),
                mcpb_protocol::RpcCode::InternalError,
                "the HTTP client has no stream open (GET) to hear the server's requests",
            );
            refusal.retain(|b| *b != b'\n');
            return Some(refusal);
        }
        out.push(&owned);
        None
    }

    /// The client cancelled one of its requests (`notifications/cancelled`): its POST gets an
    /// error now, since the session no longer answers it.
    pub(crate) fn cancelled(&self, request_id: &str) {
        let key = id_key(request_id);
        let Some(waiter) = self.waiters.lock().remove(&key) else {
            return;
        };
        let Ok(id) = serde_json::value::RawValue::from_string(request_id.to_string()) else {
            return;
        };
        let _ = waiter.send(mcpb_protocol::message::error_line(
            Some(&id),
            mcpb_protocol::RpcCode::InternalError,
            "the request was cancelled by the client (notifications/cancelled)",
        ));
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
                *self.0.last_used.lock() = Instant::now();
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

    /// Opens the session's GET stream (a new one replaces the old); after `last_event_id`,
    /// the kept events that came later go first.
    pub(crate) fn open_stream(&self, last_event_id: Option<u64>) -> StreamRx {
        let (tx, rx) = mpsc::channel(KEPT_EVENTS + STREAM_QUEUE);
        let tx = StreamTx {
            tx,
            queued: Arc::default(),
        };
        let mut out = self.outbound.lock();
        if let Some(last) = last_event_id {
            for (_, event) in out.kept.iter().filter(|(id, _)| *id > last) {
                tx.offer(event.clone());
            }
        }
        let rx = StreamRx {
            rx,
            queued: tx.queued.clone(),
            touched: self.last_used.clone(),
        };
        out.ever_opened = true;
        out.stream = Some(tx);
        *self.last_used.lock() = Instant::now();
        rx
    }

    /// How long the session has had nothing going on: no stream open, no request waiting.
    pub(crate) fn idle_for(&self) -> std::time::Duration {
        let streaming = self
            .outbound
            .lock()
            .stream
            .as_ref()
            .is_some_and(|s| !s.tx.is_closed());
        if streaming || !self.waiters.lock().is_empty() {
            return std::time::Duration::ZERO;
        }
        self.last_used.lock().elapsed()
    }

    /// Ends the session: its input closes, the session sees the end of its client.
    pub(crate) async fn close(&self) {
        let _ = self.input.lock().await.shutdown().await;
        self.outbound.lock().stream.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(out: &Outbound) -> Vec<u64> {
        out.kept.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn the_newest_events_are_kept_with_ids_in_order_and_a_stream_gets_them_live() {
        let mut out = Outbound::default();
        for _ in 0..(KEPT_EVENTS + 10) {
            out.push(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n");
        }
        let kept = ids(&out);
        assert_eq!(kept.len(), KEPT_EVENTS);
        assert_eq!(kept[0], 11);
        assert!(kept.windows(2).all(|w| w[1] == w[0] + 1));
        let (tx, mut rx) = mpsc::channel(1);
        out.stream = Some(StreamTx {
            tx,
            queued: Arc::default(),
        });
        out.push(b"{}\n");
        out.push(b"{}\n"); // the stream is full: kept, not lost
        let live = rx.try_recv().unwrap();
        assert!(live.starts_with(format!("id: {}\n", KEPT_EVENTS + 11).as_bytes()));
        assert_eq!(*ids(&out).last().unwrap(), (KEPT_EVENTS + 12) as u64);
    }

    #[tokio::test]
    async fn a_reader_that_is_behind_holds_at_most_its_byte_budget() {
        let (tx, rx) = mpsc::channel(10_000);
        let tx = StreamTx {
            tx,
            queued: Arc::default(),
        };
        let mut rx = StreamRx {
            rx,
            queued: tx.queued.clone(),
            touched: Arc::new(Mutex::new(Instant::now())),
        };
        let big = Bytes::from(vec![b'x'; 1 << 20]);
        for _ in 0..100 {
            tx.offer(big.clone());
        }
        assert!(tx.queued.load(Ordering::SeqCst) <= STREAM_BYTES);
        assert_eq!(tx.queued.load(Ordering::SeqCst), 8 << 20);
        // What the reader takes makes room again.
        rx.recv().await.unwrap();
        tx.offer(big.clone());
        assert_eq!(tx.queued.load(Ordering::SeqCst), 8 << 20);
    }

    #[test]
    fn kept_events_stay_within_their_bytes() {
        let mut out = Outbound::default();
        let big = vec![b'x'; 1 << 20];
        for _ in 0..10 {
            out.push(&big);
        }
        assert!(out.kept_bytes <= KEPT_BYTES, "{}", out.kept_bytes);
        assert_eq!(out.kept.len(), 3);
        assert_eq!(out.last_id, 10);
    }
}
