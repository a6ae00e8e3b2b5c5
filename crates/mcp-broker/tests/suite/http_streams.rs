//! The HTTP front's streams under faults: a stream that breaks resumes from its last event id,
//! a reader that stops reading misses nothing it asks for again, a cancelled request's POST
//! ends at once, a server request with no stream to carry it fails at once, and a request
//! before any initialize is served on its own; a browser's preflight is answered for allowed
//! origins only.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http_front::{auth, post};
use super::support::{Home, fixture};

/// A daemon whose HTTP front serves the fixture upstream `fx` (long call timeout).
fn fixture_front() -> (Home, u16) {
    let fx = format!(
        "  fx: {{command: \"{}\", trust_annotations: true}}",
        fixture().display()
    );
    super::http_front::http_home(&fx, "broker: {call_timeout_ms: 20000}", 8, &[])
}

/// An initialized session declaring `capabilities`; its id.
fn open(port: u16, capabilities: Value) -> String {
    let (status, sid) = super::http_front::initialize_with(port, &capabilities);
    assert_eq!(status, 200);
    let sid = sid.unwrap();
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert_eq!(post(port, &in_session(&sid), &done).0, 202);
    sid
}

fn in_session(sid: &str) -> String {
    format!("{}\r\nMcp-Session-Id: {sid}", auth())
}

/// A call of `fx.progress` sending `count` progress notifications, answered over POST.
fn progress(port: u16, sid: &str, id: u64, count: u64) -> String {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "fx.progress", "arguments": {"count": count, "interval_ms": 0},
        "_meta": {"progressToken": format!("p{id}")}}});
    let (status, _, body) = post(port, &in_session(sid), &call.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("{count} steps")), "{body}");
    body
}

/// Opens the session's GET stream, after `last` when given.
fn stream(port: u16, sid: &str, last: Option<u64>) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let resume = last.map_or(String::new(), |n| format!("\r\nLast-Event-ID: {n}"));
    let req = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}{}\r\nAccept: text/event-stream{resume}\r\n\r\n",
        in_session(sid)
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Reads events from `s` until `n` progress notifications of a token starting with `token`
/// came (or the stream stays quiet): their event ids.
fn read_progress(s: &mut TcpStream, token: &str, n: usize) -> Vec<u64> {
    let mut text = String::new();
    let mut buf = [0u8; 16384];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ids: Vec<u64> = events(&text)
            .filter(|(_, data)| data.contains(&format!("\"progressToken\":\"{token}")))
            .map(|(id, _)| id)
            .collect();
        if ids.len() >= n || Instant::now() > deadline {
            return ids;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return ids,
            Ok(k) => text.push_str(&String::from_utf8_lossy(&buf[..k])),
        }
    }
}

/// (id, data) of every complete SSE event in `text` (chunked framing lines are skipped).
fn events(text: &str) -> impl Iterator<Item = (u64, &str)> {
    text.split("\n\n").filter_map(|block| {
        let id = block
            .lines()
            .find_map(|l| l.strip_prefix("id: "))?
            .trim()
            .parse()
            .ok()?;
        let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
        Some((id, data))
    })
}

#[test]
fn a_broken_stream_resumes_from_its_last_event_id_and_a_stalled_reader_misses_nothing() {
    let (_home, port) = fixture_front();
    let sid = open(port, json!({}));
    let mut s = stream(port, &sid, None);
    progress(port, &sid, 2, 5);
    let first = read_progress(&mut s, "p2", 5);
    assert_eq!(first.len(), 5, "{first:?}");
    assert!(first.windows(2).all(|w| w[1] > w[0]), "{first:?}");
    drop(s); // the stream breaks

    // What came while no stream was open arrives on the resumed one, after the last id seen.
    progress(port, &sid, 3, 7);
    let last = *first.last().unwrap();
    let mut s = stream(port, &sid, Some(last));
    let missed = read_progress(&mut s, "p3", 7);
    assert_eq!(missed.len(), 7, "{missed:?}");
    assert!(
        missed.iter().all(|id| *id > last),
        "{missed:?} after {last}"
    );
    drop(s);

    // A reader that stops reading under a flood holds nothing up: the calls are answered
    // (progress is advisory: the session may drop some on the way), and the newest events are
    // all still there, in order, for it when it asks again.
    let stalled = stream(port, &sid, Some(*missed.last().unwrap()));
    let t = Instant::now();
    for id in 10..14 {
        progress(port, &sid, id, 1500);
    }
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    drop(stalled);
    let mut s = stream(port, &sid, Some(0));
    let kept = read_progress(&mut s, "p1", 512);
    assert!(kept.len() >= 20, "{}", kept.len());
    assert!(
        kept.windows(2).all(|w| w[1] == w[0] + 1),
        "a gap in {kept:?}"
    );
}

#[test]
fn a_cancelled_request_gets_its_answer_at_once_and_the_session_goes_on() {
    let (home, port) = fixture_front();
    let sid = open(port, json!({}));
    let hang = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "fx.hang", "arguments": {}}})
    .to_string();
    let t = Instant::now();
    let waiting = {
        let sid = sid.clone();
        std::thread::spawn(move || post(port, &in_session(&sid), &hang))
    };
    assert!(
        super::support::wait_until(Duration::from_secs(5), || {
            super::support::upstream_status(&home, "fx")["active_call_count"] == 1
        }),
        "the call never reached the upstream"
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "user gave up"}})
    .to_string();
    assert_eq!(post(port, &in_session(&sid), &cancel).0, 202);
    let (status, _, body) = waiting.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("cancelled"), "{body}");
    let echo = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "fx.echo", "arguments": {"text": "on"}}})
    .to_string();
    let (_, _, body) = post(port, &in_session(&sid), &echo);
    assert!(body.contains("\"on\""), "{body}");
}

#[test]
fn a_server_request_with_no_stream_to_carry_it_fails_at_once() {
    let (_home, port) = fixture_front();
    let sid = open(port, json!({"sampling": {}}));
    let sample = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx.sample", "arguments": {}}})
    .to_string();
    let t = Instant::now();
    let (status, _, body) = post(port, &in_session(&sid), &sample);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("no stream open"), "{body}");
}

#[test]
fn a_request_before_any_initialize_is_served_on_its_own_and_leaves_no_session() {
    let (home, port) = fixture_front();
    let before = home.status()["daemon"]["sessions"].as_u64().unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (status, headers, body) = post(port, &auth(), &list);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"fx.echo\""), "{body}");
    assert!(
        !headers.to_ascii_lowercase().contains("mcp-session-id"),
        "{headers}"
    );
    // A made-up session is unknown, whatever the request.
    let (status, _, _) = post(port, &in_session("0123456789abcdef0123456789abcdef"), &list);
    assert_eq!(status, 404);
    let deadline = Instant::now() + Duration::from_secs(5);
    while home.status()["daemon"]["sessions"].as_u64().unwrap() > before {
        assert!(Instant::now() < deadline, "a session stayed open");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_browser_preflight_is_answered_for_allowed_origins_only() {
    let (_home, port) = fixture_front();
    let preflight = |origin: &str| {
        super::http_front::raw(
            port,
            &format!(
                "OPTIONS /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type"
            ),
            "",
        )
    };
    let (status, headers, _) = preflight("http://localhost:6274");
    let headers = headers.to_ascii_lowercase();
    assert_eq!(status, 204, "{headers}");
    assert!(
        headers.contains("access-control-allow-origin: http://localhost:6274"),
        "{headers}"
    );
    assert!(headers.contains("mcp-session-id"), "{headers}");
    let (status, headers, _) = preflight("https://evil.example");
    assert_eq!(status, 403);
    assert!(
        !headers
            .to_ascii_lowercase()
            .contains("access-control-allow-origin")
    );
    // The real request from an allowed page can read its answer and the session id.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let (status, headers, _) = post(
        port,
        &format!("{}\r\nOrigin: http://localhost:6274", auth()),
        &ping,
    );
    assert_eq!(status, 200);
    let headers = headers.to_ascii_lowercase();
    assert!(
        headers.contains("access-control-allow-origin: http://localhost:6274"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-expose-headers: mcp-session-id"),
        "{headers}"
    );
    let (status, headers, _) = post(
        port,
        &format!("{}\r\nOrigin: https://evil.example", auth()),
        &ping,
    );
    assert_eq!(status, 403);
    assert!(
        !headers
            .to_ascii_lowercase()
            .contains("access-control-allow-origin")
    );
}

const MODERN: &str = r#"{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {}}"#;

/// A stateless `subscriptions/listen` POST, its connection left open for its stream.
fn listening(port: u16) -> TcpStream {
    let meta: Value = serde_json::from_str(MODERN).unwrap();
    let listen = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}, "_meta": meta}})
    .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{listen}",
        auth(),
        listen.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

#[test]
fn listening_streams_count_against_their_tokens_sessions() {
    let fx = format!("  fx: {{command: \"{}\"}}", fixture().display());
    let (home, port) = super::http_front::http_home(&fx, "", 2, &[]);
    let mut open: Vec<TcpStream> = (0..2).map(|_| listening(port)).collect();
    for s in &mut open {
        let mut head = [0u8; 12];
        s.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
    }
    let mut third = listening(port);
    let mut head = [0u8; 12];
    third.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 429", "the token's two sessions are taken");
    assert!(home.status()["daemon"]["sessions"].as_u64().unwrap() <= 2);
    drop(open);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = listening(port);
        let mut head = [0u8; 12];
        again.read_exact(&mut head).unwrap();
        if &head == b"HTTP/1.1 200" {
            break;
        }
        assert!(Instant::now() < deadline, "the seats never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stateless_client_listens_for_list_changes_on_a_post_stream() {
    let (home, port) = fixture_front();
    let before = home.status()["daemon"]["sessions"].as_u64().unwrap();
    let meta: Value = serde_json::from_str(MODERN).unwrap();
    let mut s = listening(port);
    let mut seen = String::new();
    let mut read_until = |s: &mut TcpStream, what: &str| {
        let mut buf = [0u8; 8192];
        while !seen.contains(what) {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => seen.push_str(&String::from_utf8_lossy(&buf[..k])),
            }
        }
        seen.contains(what)
    };
    assert!(read_until(
        &mut s,
        "notifications/subscriptions/acknowledged"
    ));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx.list_changed", "arguments": {}, "_meta": meta}})
    .to_string();
    let (status, _, body) = post(port, &auth(), &call);
    assert_eq!(status, 200, "{body}");
    assert!(read_until(&mut s, "notifications/tools/list_changed"));
    assert!(
        seen.to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    drop(s); // the listener leaves: its session ends
    let deadline = Instant::now() + Duration::from_secs(5);
    while home.status()["daemon"]["sessions"].as_u64().unwrap() > before {
        assert!(
            Instant::now() < deadline,
            "the listening session stayed open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
