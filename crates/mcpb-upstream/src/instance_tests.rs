//! An instance over an in-memory pipe pair instead of a child process: a `Transport` of the
//! test's own driving the same writer and reader tasks, pending map and timers, with the test
//! playing the upstream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::oneshot;

use super::{CallOptions, Instance, Outgoing, Reply, Setup};
use crate::UpstreamError;
use crate::inbound::fail_all;
use crate::link::{ClientLink, Responder};
use crate::stdio::{read_loop, write_loop};
use crate::transport::{Channels, Transport};

/// The upstream's end: what the broker wrote, and a way to answer.
struct Peer {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    out: tokio::io::WriteHalf<DuplexStream>,
}

impl Peer {
    async fn next(&mut self) -> Value {
        let line = self.lines.next_line().await.unwrap().expect("a line");
        serde_json::from_str(&line).unwrap()
    }

    async fn send(&mut self, v: &str) {
        self.out.write_all(v.as_bytes()).await.unwrap();
        self.out.write_all(b"\n").await.unwrap();
    }
}

/// The broker's end of an in-memory pipe as a transport. Stopping it closes its input and
/// fails what waits, as the supervisor of a real process does.
struct Duplex(DuplexStream);

impl Transport for Duplex {
    fn open(
        self: Box<Self>,
        ch: Channels,
    ) -> BoxFuture<'static, Result<crate::transport::Peer, UpstreamError>> {
        Box::pin(async move {
            let (our_read, our_write) = tokio::io::split(self.0);
            let (close_tx, close_rx) = oneshot::channel::<()>();
            let read = ch.read;
            tokio::spawn(write_loop(
                "mem".into(),
                our_write,
                ch.inbox,
                close_rx,
                Duration::from_secs(5),
                read.stop.clone(),
            ));
            tokio::spawn(read_loop(our_read, read.clone()));
            let exit = ch.exit;
            tokio::spawn(async move {
                read.stop.notified().await;
                let _ = close_tx.send(());
                read.alive.store(false, Ordering::SeqCst);
                let _ = exit.send(Some("stopped".into()));
                fail_all(&read.pending);
            });
            Ok(crate::transport::Peer::Remote { url: "mem".into() })
        })
    }
}

/// An instance whose upstream is the returned peer.
async fn instance() -> (Arc<Instance>, Peer, Arc<AtomicBool>) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (their_read, their_write) = tokio::io::split(theirs);
    let stale = Arc::new(AtomicBool::new(false));
    let inst = Instance::open(
        Box::new(Duplex(ours)),
        Setup {
            name: "mem".into(),
            max_frame_bytes: 64 * 1024,
            on_list_changed: None,
            on_notice: None,
            tools_stale: stale.clone(),
            permits: Vec::new(),
            forward_meta: vec!["vendor/keep".into()],
            redact_results: false,
        },
    )
    .await
    .unwrap();
    let peer = Peer {
        lines: BufReader::new(their_read).lines(),
        out: their_write,
    };
    (inst, peer, stale)
}

/// A plain request of `method`, answered (or not) by the test's peer.
fn request(
    inst: &Arc<Instance>,
    method: &'static str,
    timeout: Duration,
) -> tokio::task::JoinHandle<Result<Reply, UpstreamError>> {
    let inst = inst.clone();
    tokio::spawn(async move { inst.request(method, None, timeout).await })
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_string()).unwrap()
}

fn opts(idle_ms: u64, max_ms: u64, link: Option<Arc<dyn ClientLink>>) -> CallOptions {
    CallOptions {
        idle_timeout: Duration::from_millis(idle_ms),
        max_time: Duration::from_millis(max_ms),
        link,
    }
}

fn result_text(r: Result<Reply, UpstreamError>) -> String {
    match r.unwrap() {
        Reply::Result(r) => r.get().to_string(),
        Reply::Error(e) => format!("error {}", e.get()),
    }
}

/// A session that records what reaches it.
#[derive(Default)]
struct Recorder {
    notes: Mutex<Vec<Value>>,
}

impl ClientLink for Recorder {
    fn session_id(&self) -> u64 {
        9
    }
    fn notify(&self, line: Vec<u8>) {
        self.notes
            .lock()
            .push(serde_json::from_slice(&line).unwrap());
    }
    fn forward_request(&self, _method: &str, _params: Option<&RawValue>, reply: Responder) {
        reply.result(&raw(r#"{"roots":[]}"#));
    }
}

#[tokio::test]
async fn an_answer_reaches_its_request_and_leaves_nothing_pending() {
    let (inst, mut peer, _) = instance().await;
    let call = request(&inst, "ping", Duration::from_secs(5));
    let sent = peer.next().await;
    assert_eq!(sent["method"], "ping");
    assert_eq!(inst.pending.lock().len(), 1);
    assert!(inst.idle_for().is_none(), "busy while a request waits");
    peer.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"ok":1}}}}"#,
        sent["id"]
    ))
    .await;
    assert_eq!(result_text(call.await.unwrap()), r#"{"ok":1}"#);
    assert!(inst.pending.lock().is_empty());
    assert!(inst.idle_for().is_some());
}

#[tokio::test]
async fn answers_out_of_order_go_to_their_own_requests() {
    let (inst, mut peer, _) = instance().await;
    let a = request(&inst, "a", Duration::from_secs(5));
    let b = request(&inst, "b", Duration::from_secs(5));
    let first = peer.next().await;
    let second = peer.next().await;
    assert_ne!(first["id"], second["id"], "ids are the instance's own");
    for (msg, text) in [(&second, "second"), (&first, "first")] {
        peer.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"m":"{text}-{}"}}}}"#,
            msg["id"],
            msg["method"].as_str().unwrap()
        ))
        .await;
    }
    let a = result_text(a.await.unwrap());
    let b = result_text(b.await.unwrap());
    assert!(a.contains("-a") && b.contains("-b"), "{a} {b}");
}

#[tokio::test]
async fn a_dropped_call_is_withdrawn_and_cancelled_upstream() {
    let (inst, mut peer, _) = instance().await;
    let call = request(&inst, "slow", Duration::from_secs(60));
    let sent = peer.next().await;
    call.abort();
    let cancel = peer.next().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], sent["id"]);
    assert!(inst.pending.lock().is_empty());
    // A late answer to it is dropped, not misrouted.
    peer.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        sent["id"]
    ))
    .await;
    let next = request(&inst, "next", Duration::from_secs(5));
    let sent = peer.next().await;
    peer.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"n":2}}}}"#,
        sent["id"]
    ))
    .await;
    assert_eq!(result_text(next.await.unwrap()), r#"{"n":2}"#);
}

#[tokio::test(start_paused = true)]
async fn a_silent_upstream_times_out_and_the_request_is_forgotten() {
    let (inst, mut peer, _) = instance().await;
    let call = request(&inst, "hang", Duration::from_millis(500));
    let _ = peer.next().await;
    match call.await.unwrap() {
        Err(UpstreamError::Timeout { ms, .. }) => assert_eq!(ms, 500),
        other => panic!("{other:?}"),
    }
    assert!(inst.pending.lock().is_empty());
    assert_eq!(peer.next().await["method"], "notifications/cancelled");
}

#[tokio::test(start_paused = true)]
async fn progress_keeps_a_call_alive_up_to_the_hard_limit_and_reaches_its_session() {
    let (inst, mut peer, _) = instance().await;
    let rec = Arc::new(Recorder::default());
    let link: Arc<dyn ClientLink> = rec.clone();
    let call = {
        let inst = inst.clone();
        tokio::spawn(async move {
            let params = raw(r#"{"name":"x.slow","arguments":{},"_meta":{"progressToken":"t1"}}"#);
            let out = Outgoing::ToolCall {
                tool: "slow",
                params: &params,
                meta: &[],
            };
            inst.send(out, &opts(1000, 3000, Some(link))).await
        })
    };
    let sent = peer.next().await;
    assert_eq!(sent["params"]["name"], "slow", "the upstream's own name");
    let token = sent["params"]["_meta"]["progressToken"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(token, "t1", "the broker's own token upstream");
    let started = tokio::time::Instant::now();
    for i in 0..10 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        if call.is_finished() {
            break;
        }
        peer.send(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"{token}","progress":{i}}}}}"#
        ))
        .await;
    }
    match call.await.unwrap() {
        Err(UpstreamError::HardLimit { ms, .. }) => assert_eq!(ms, 3000),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(3000));
    let notes = rec.notes.lock();
    assert!(!notes.is_empty());
    assert_eq!(
        notes[0]["params"]["progressToken"], "t1",
        "the client's own token back"
    );
}

#[tokio::test]
async fn a_stopped_instance_fails_what_waits_and_refuses_new_requests() {
    let (inst, mut peer, _) = instance().await;
    let call = request(&inst, "hang", Duration::from_secs(60));
    let _ = peer.next().await;
    inst.stop().await;
    assert!(matches!(
        call.await.unwrap(),
        Err(UpstreamError::Exited { .. })
    ));
    assert!(!inst.is_alive());
    assert!(matches!(
        inst.request("more", None, Duration::from_secs(1)).await,
        Err(UpstreamError::Exited { .. })
    ));
}

#[tokio::test]
async fn an_upstream_that_writes_garbage_is_stopped_as_unhealthy() {
    let (inst, mut peer, _) = instance().await;
    for _ in 0..crate::stdio::MAX_BAD_LINES {
        peer.send("this is a log line, not JSON-RPC").await;
    }
    let mut exit = inst.exit.clone();
    tokio::time::timeout(Duration::from_secs(5), exit.wait_for(Option::is_some))
        .await
        .unwrap()
        .unwrap();
    assert!(!inst.is_alive());
}

#[tokio::test]
async fn a_changed_list_is_marked_and_server_requests_reach_the_calling_session() {
    let (inst, mut peer, stale) = instance().await;
    peer.send(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
        .await;
    let link: Arc<dyn ClientLink> = Arc::new(Recorder::default());
    let call = {
        let inst = inst.clone();
        tokio::spawn(async move {
            let params = raw(r#"{"name":"x.roots","arguments":{}}"#);
            let out = Outgoing::ToolCall {
                tool: "roots",
                params: &params,
                meta: &[],
            };
            inst.send(out, &opts(5000, 5000, Some(link))).await
        })
    };
    let sent = peer.next().await;
    assert!(
        stale.load(Ordering::SeqCst),
        "the list is marked for a refresh"
    );
    peer.send(r#"{"jsonrpc":"2.0","id":"up-1","method":"roots/list"}"#)
        .await;
    let answer = peer.next().await;
    assert_eq!(answer["id"], "up-1");
    assert_eq!(answer["result"]["roots"], serde_json::json!([]));
    peer.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"done":true}}}}"#,
        sent["id"]
    ))
    .await;
    assert_eq!(result_text(call.await.unwrap()), r#"{"done":true}"#);
}

#[tokio::test]
async fn a_stateless_upstream_gets_the_envelope_and_only_allowed_client_meta() {
    let (inst, mut peer, _) = instance().await;
    inst.era.set(mcpb_protocol::Era::Stateless).unwrap();
    let call = {
        let inst = inst.clone();
        tokio::spawn(async move {
            let params = raw(
                r#"{"name":"x.t","_meta":{"vendor/keep":1,"secret/token":"s","io.modelcontextprotocol/clientInfo":{"name":"c"}}}"#,
            );
            let meta = [("mcp-broker/result_budget_chars", "100")];
            let out = Outgoing::ToolCall {
                tool: "t",
                params: &params,
                meta: &meta,
            };
            inst.send(out, &opts(5000, 5000, None)).await
        })
    };
    let sent = peer.next().await;
    let meta = &sent["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "mcp-broker"
    );
    assert_eq!(meta["vendor/keep"], 1);
    assert!(meta.get("secret/token").is_none());
    assert_eq!(meta["mcp-broker/result_budget_chars"], 100);
    peer.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        sent["id"]
    ))
    .await;
    let _ = call.await.unwrap();
}
