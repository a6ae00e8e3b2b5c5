//! What a server said last on stderr, carried with the error of a failed start (to the client
//! that asked) and with the status (to the operator): usually the reason.

use crate::{Upstream, UpstreamError};

impl Upstream {
    /// The server's last stderr line, which usually is the reason ("No module named ...").
    pub(crate) fn last_words(&self) -> Option<String> {
        self.stderr_tail
            .lines()
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| {
                format!(
                    "; it said: {} (more: `mcp-broker logs {}`)",
                    l.chars().take(200).collect::<String>(),
                    self.settings.name
                )
            })
    }

    /// A failed start's error with the server's last words, for the client that asked.
    #[expect(
        clippy::wildcard_enum_match_arm,
        reason = "only errors with a reason take the last words; the others pass on"
    )]
    pub(crate) fn with_last_words(&self, e: UpstreamError) -> UpstreamError {
        let Some(said) = self.last_words() else {
            return e;
        };
        match e {
            UpstreamError::Exited { upstream, status } => UpstreamError::Exited {
                upstream,
                status: status + &said,
            },
            UpstreamError::Handshake { upstream, reason } => UpstreamError::Handshake {
                upstream,
                reason: reason + &said,
            },
            UpstreamError::Protocol { upstream, reason } => UpstreamError::Protocol {
                upstream,
                reason: reason + &said,
            },
            other => other,
        }
    }
}
