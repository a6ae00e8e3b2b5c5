//! Upstream notifications for clients: which sessions hear of a resource update (those that
//! subscribed to it, in the URI form they used), a changed resource or prompt list (those whose
//! profile sees the upstream) and a log message (those that see the upstream, once a session
//! set a level with `logging/setLevel` only at that level and above).

use std::collections::HashMap;

use mcpb_protocol::message::notification_line;
use parking_lot::Mutex;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::link::Registry;

/// (upstream, URI as the upstream knows it) → session → URI as that session wrote it.
#[derive(Default)]
pub(crate) struct Subscriptions(Mutex<HashMap<(String, String), HashMap<u64, String>>>);

impl Subscriptions {
    /// Returns whether the session is the URI's first subscriber.
    pub(crate) fn add(&self, session: u64, upstream: &str, uri: &str, client_uri: &str) -> bool {
        let mut map = self.0.lock();
        let subs = map
            .entry((upstream.to_string(), uri.to_string()))
            .or_default();
        let first = subs.is_empty();
        subs.insert(session, client_uri.to_string());
        first
    }

    /// Returns whether the session was the URI's last subscriber.
    pub(crate) fn remove(&self, session: u64, upstream: &str, uri: &str) -> bool {
        let mut map = self.0.lock();
        let key = (upstream.to_string(), uri.to_string());
        let Some(subs) = map.get_mut(&key) else {
            return false;
        };
        subs.remove(&session);
        let last = subs.is_empty();
        if last {
            map.remove(&key);
        }
        last
    }

    /// Forgets a session that ended; returns the (upstream, URI) it was the last subscriber
    /// of, which the upstream is to be told about.
    /// Whether any session is subscribed to a resource of `upstream`.
    pub(crate) fn any_for(&self, upstream: &str) -> bool {
        self.0.lock().keys().any(|(u, _)| u == upstream)
    }

    pub(crate) fn drop_session(&self, session: u64) -> Vec<(String, String)> {
        let mut map = self.0.lock();
        let mut last = Vec::new();
        map.retain(|key, subs| {
            if subs.remove(&session).is_some() && subs.is_empty() {
                last.push(key.clone());
            }
            !subs.is_empty()
        });
        last
    }

    pub(crate) fn has_subscribers(&self, upstream: &str, uri: &str) -> bool {
        self.0
            .lock()
            .contains_key(&(upstream.to_string(), uri.to_string()))
    }

    fn subscribers(&self, upstream: &str, uri: &str) -> Vec<(u64, String)> {
        self.0
            .lock()
            .get(&(upstream.to_string(), uri.to_string()))
            .map(|s| s.iter().map(|(id, u)| (*id, u.clone())).collect())
            .unwrap_or_default()
    }
}

/// RFC 5424 severities as MCP names them, least severe first.
const LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

pub(crate) fn level_rank(level: &str) -> Option<u8> {
    LEVELS
        .iter()
        .position(|l| *l == level)
        .and_then(|p| u8::try_from(p).ok())
}

/// Hands one upstream notification to the sessions it concerns.
pub(crate) fn deliver(
    registry: &Registry,
    subs: &Subscriptions,
    upstream: &str,
    method: &str,
    params: Option<&RawValue>,
) {
    let parsed = || -> Value {
        params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null)
    };
    match method {
        "notifications/resources/updated" => {
            // An upstream's words like any other: a secret it was given never travels on.
            let mut v = parsed();
            mcpb_redact::redact_value(&mut v);
            let Some(uri) = v.get("uri").and_then(Value::as_str) else {
                return;
            };
            for (session, client_uri) in subs.subscribers(upstream, uri) {
                let mut p = v.clone();
                p["uri"] = Value::String(client_uri);
                let Ok(raw) = RawValue::from_string(p.to_string()) else {
                    continue;
                };
                registry.send(session, notification_line(method, Some(&raw)));
            }
        }
        "notifications/message" => {
            let mut v = parsed();
            let Some(rank) = v.get("level").and_then(Value::as_str).and_then(level_rank) else {
                return;
            };
            // Which server said it matters once several share one client.
            if v.get("logger").is_none() {
                v["logger"] = Value::String(upstream.to_string());
            }
            mcpb_redact::redact_value(&mut v);
            let Ok(raw) = RawValue::from_string(v.to_string()) else {
                return;
            };
            let line = notification_line(method, Some(&raw));
            registry.each_seeing(upstream, |link| {
                if link.log_level().is_none_or(|wanted| rank >= wanted) {
                    crate::link::notify(link, line.clone());
                }
            });
        }
        _ => {
            let redacted =
                params
                    .filter(|_| mcpb_redact::any())
                    .and_then(|p| match mcpb_redact::redact_json(p.get()) {
                        std::borrow::Cow::Owned(t) => RawValue::from_string(t).ok(),
                        std::borrow::Cow::Borrowed(_) => None,
                    });
            let line = notification_line(method, redacted.as_deref().or(params));
            registry.each_seeing(upstream, |link| {
                if !link.era().is_stateless() {
                    crate::link::notify(link, line.clone());
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_know_their_first_and_last_subscriber() {
        let s = Subscriptions::default();
        assert!(s.add(1, "up", "x://a", "mcpb://up/x://a"));
        assert!(!s.add(2, "up", "x://a", "x://a"));
        assert_eq!(s.subscribers("up", "x://a").len(), 2);
        assert!(!s.remove(1, "up", "x://a"));
        assert!(s.add(3, "up", "x://b", "x://b"));
        assert!(!s.add(4, "up", "x://b", "x://b"));
        assert_eq!(s.drop_session(3), Vec::<(String, String)>::new());
        assert_eq!(
            s.drop_session(2),
            vec![("up".to_string(), "x://a".to_string())]
        );
        assert!(s.subscribers("up", "x://a").is_empty());
        assert!(!s.remove(2, "up", "x://a"));
    }

    #[test]
    fn levels_rank_by_severity() {
        assert!(level_rank("debug") < level_rank("warning"));
        assert_eq!(level_rank("emergency"), Some(7));
        assert_eq!(level_rank("loud"), None);
    }
}
