use std::sync::Arc;
use std::time::Duration;

use mcpb_protocol::Era;
use mcpb_upstream::{ClientLink, Responder};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{Registry, SessionLink};
use crate::outbox::ClientQueue;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_string()).unwrap()
}

/// A link over an in-memory queue, and the receiving end of that queue.
fn link(id: u64, upstreams: &[&str]) -> (Arc<SessionLink>, mpsc::Receiver<Vec<u8>>) {
    let (out, rx) = ClientQueue::new(1 << 20, Duration::from_secs(1), None);
    let upstreams = upstreams.iter().map(|s| s.to_string()).collect();
    (Arc::new(SessionLink::new(id, out, upstreams)), rx)
}

fn frames(rx: &mut mpsc::Receiver<Vec<u8>>) -> Vec<Value> {
    let mut out = Vec::new();
    while let Ok(f) = rx.try_recv() {
        out.push(serde_json::from_slice(&f).unwrap());
    }
    out
}

fn responder() -> (Responder, mpsc::Receiver<Vec<u8>>) {
    let (tx, rx) = mpsc::channel(4);
    (Responder::new(tx, raw("41")), rx)
}

#[test]
fn list_changes_reach_only_sessions_that_see_the_upstream() {
    let registry = Registry::default();
    let (a, mut a_rx) = link(registry.next_id(), &["git"]);
    let (b, mut b_rx) = link(registry.next_id(), &["time"]);
    assert_ne!(a.session_id(), b.session_id());
    registry.add(a.clone());
    registry.add(b.clone());
    registry.list_changed("git");
    let got = frames(&mut a_rx);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["method"], "notifications/tools/list_changed");
    assert!(frames(&mut b_rx).is_empty());
    registry.all_lists_changed();
    assert_eq!(frames(&mut a_rx).len(), 1);
    assert_eq!(frames(&mut b_rx).len(), 1);
    registry.remove(a.session_id());
    registry.list_changed("git");
    assert!(
        frames(&mut a_rx).is_empty(),
        "a removed session hears nothing"
    );
}

#[test]
fn a_profile_change_moves_what_a_session_hears() {
    let (a, mut rx) = link(1, &["git"]);
    assert!(a.sees("git") && !a.sees("time"));
    a.set_upstreams(vec!["time".into()]);
    assert!(!a.sees("git") && a.sees("time"));
    let registry = Registry::default();
    registry.add(a);
    registry.list_changed("git");
    assert!(frames(&mut rx).is_empty());
}

#[test]
fn a_stateless_client_hears_of_changes_only_on_its_subscription() {
    let (a, mut rx) = link(1, &["git"]);
    a.set_era(Era::Stateless);
    a.tools_changed();
    assert!(
        frames(&mut rx).is_empty(),
        "no subscription, no notification"
    );
    let ack: Value = serde_json::from_slice(&a.listen(&raw("\"sub-1\""), true)).unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
    a.tools_changed();
    let got = frames(&mut rx);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    let end: Value = serde_json::from_slice(&a.end_listen().unwrap()).unwrap();
    assert_eq!(end["id"], "sub-1");
    assert_eq!(end["result"]["resultType"], "complete");
    assert!(a.end_listen().is_none(), "the stream ends once");
}

#[test]
fn a_subscription_without_tools_asks_for_nothing() {
    let (a, mut rx) = link(1, &["git"]);
    a.set_era(Era::Stateless);
    let ack: Value = serde_json::from_slice(&a.listen(&raw("3"), false)).unwrap();
    assert_eq!(ack["params"]["notifications"], serde_json::json!({}));
    a.tools_changed();
    assert!(frames(&mut rx).is_empty());
}

#[test]
fn server_requests_need_the_declared_capability() {
    let (a, mut rx) = link(1, &["git"]);
    let (reply, mut upstream) = responder();
    a.forward_request("sampling/createMessage", None, reply);
    assert!(frames(&mut rx).is_empty(), "nothing reaches the client");
    let refused: Value = serde_json::from_slice(&upstream.try_recv().unwrap()).unwrap();
    assert_eq!(refused["id"], 41);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'sampling' capability")
    );
}

#[test]
fn a_declared_request_goes_out_and_its_answer_comes_back_once() {
    let (a, mut rx) = link(1, &["git"]);
    a.set_capabilities(serde_json::json!({"roots": {}}));
    let (reply, mut upstream) = responder();
    a.forward_request("roots/list", None, reply);
    let sent = frames(&mut rx);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["method"], "roots/list");
    let id = raw(&sent[0]["id"].to_string());
    let result = raw(r#"{"roots":[]}"#);
    assert!(a.complete(&id, Some(&result), None));
    let answer: Value = serde_json::from_slice(&upstream.try_recv().unwrap()).unwrap();
    assert_eq!(answer["id"], 41, "the upstream's own id comes back");
    assert_eq!(answer["result"]["roots"], serde_json::json!([]));
    assert!(!a.complete(&id, Some(&result), None), "answered once");
    assert!(!a.complete(&raw("\"mcpb-s999\""), None, None), "never sent");
}

#[test]
fn a_stateless_client_is_sent_no_server_requests() {
    let (a, mut rx) = link(1, &["git"]);
    a.set_capabilities(serde_json::json!({"roots": {}}));
    a.set_era(Era::Stateless);
    let (reply, mut upstream) = responder();
    a.forward_request("roots/list", None, reply);
    assert!(frames(&mut rx).is_empty());
    let refused: Value = serde_json::from_slice(&upstream.try_recv().unwrap()).unwrap();
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-07-28")
    );
}

#[test]
fn closing_the_link_answers_waiting_upstreams() {
    let (a, _rx) = link(1, &["git"]);
    a.set_capabilities(serde_json::json!({"elicitation": {}}));
    let (reply, mut upstream) = responder();
    a.forward_request("elicitation/create", None, reply);
    assert!(upstream.try_recv().is_err(), "still waiting for the client");
    a.close();
    let ended: Value = serde_json::from_slice(&upstream.try_recv().unwrap()).unwrap();
    assert!(
        ended["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ended before answering")
    );
}
