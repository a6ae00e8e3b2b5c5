//! What a remote upstream's HTTP answers said about its credentials: the last refusal (401 or
//! 403) and the last failed token refresh, each with its time, cleared by the next accepted
//! request. Kept per upstream across its instances, for `broker.status`: a real state, not a
//! guess from an error's words. Never holds a token or a header value.

use parking_lot::Mutex;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub status: u16,
    pub at_unix: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefreshFailure {
    pub error: String,
    pub at_unix: u64,
}

/// The auth-related facts of the latest requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuthSeen {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_refusal: Option<Refusal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_failure: Option<RefreshFailure>,
}

impl AuthSeen {
    /// Whether the server is refusing this broker's credentials now.
    pub fn refused(&self) -> bool {
        self.last_refusal.is_some() || self.refresh_failure.is_some()
    }
}

/// Shared by an upstream and its remote instances' request tasks.
#[derive(Debug, Default)]
pub(crate) struct AuthLog(Mutex<AuthSeen>);

impl AuthLog {
    /// An HTTP answer's status: a 401, or a 403 that asks for credentials (`challenged`: it
    /// carries `WWW-Authenticate`; a rate limit's 403 does not), is a refusal; a success
    /// clears them.
    pub(crate) fn answered(&self, status: u16, challenged: bool) {
        match status {
            401 => self.refusal(status),
            403 if challenged => self.refusal(status),
            200..=299 => self.accepted(),
            _ => {}
        }
    }

    pub(crate) fn refusal(&self, status: u16) {
        self.0.lock().last_refusal = Some(Refusal {
            status,
            at_unix: mcpb_config::unix_now(),
        });
    }

    pub(crate) fn refresh_failed(&self, error: &str) {
        self.0.lock().refresh_failure = Some(RefreshFailure {
            error: mcpb_redact::redact(error).into_owned(),
            at_unix: mcpb_config::unix_now(),
        });
    }

    /// A request went through: whatever was refused before holds no more.
    pub(crate) fn accepted(&self) {
        let mut s = self.0.lock();
        if s.refused() {
            *s = AuthSeen::default();
        }
    }

    pub(crate) fn seen(&self) -> AuthSeen {
        self.0.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_holds_until_a_request_is_accepted() {
        let log = AuthLog::default();
        assert!(!log.seen().refused());
        log.answered(500, false);
        log.answered(403, false);
        assert!(
            !log.seen().refused(),
            "a 403 without a challenge is not about credentials"
        );
        log.answered(401, false);
        log.refresh_failed("invalid_grant");
        let seen = log.seen();
        assert_eq!(seen.last_refusal.as_ref().map(|r| r.status), Some(401));
        assert!(seen.refused());
        log.answered(202, false);
        assert_eq!(log.seen(), AuthSeen::default());
    }
}
