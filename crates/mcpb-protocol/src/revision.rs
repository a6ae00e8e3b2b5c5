//! MCP protocol revisions and how the broker picks one with each peer.

/// Revisions negotiated through `initialize`, oldest first.
pub const HANDSHAKE_REVISIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Revisions negotiated through `server/discover` with per-request `_meta` (stateless).
pub const MODERN_REVISIONS: &[&str] = &["2026-07-28"];

/// JSON-RPC error for a revision the broker does not speak; `data.supported` lists the ones it
/// does.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

pub fn is_modern(revision: &str) -> bool {
    MODERN_REVISIONS.contains(&revision)
}

/// Every revision the broker speaks with clients, oldest first.
pub fn all() -> Vec<&'static str> {
    HANDSHAKE_REVISIONS
        .iter()
        .chain(MODERN_REVISIONS)
        .copied()
        .collect()
}

/// The newest revision the broker offers through `initialize`.
pub const LATEST_HANDSHAKE: &str = "2025-11-25";

/// The revision to answer a client's `initialize` with: its own when the broker speaks it, else
/// the newest the broker speaks (the client then decides whether to continue).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| HANDSHAKE_REVISIONS.iter().copied().find(|s| *s == r))
        .unwrap_or(LATEST_HANDSHAKE)
}

/// Whether an upstream's answer to our `initialize` names a revision the broker can speak.
pub fn is_supported(revision: &str) -> bool {
    HANDSHAKE_REVISIONS.contains(&revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_known_revisions_and_offers_latest_otherwise() {
        assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("1999-01-01")), LATEST_HANDSHAKE);
        assert_eq!(negotiate(None), LATEST_HANDSHAKE);
    }
}
