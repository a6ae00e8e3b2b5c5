//! Who may talk to the HTTP front: the Host header must name this listener (DNS rebinding
//! protection), a browser's Origin must be one the config lists, and the bearer token must be
//! one of the configured ones, compared in constant time. A request that fails any of these is
//! answered 401 or 403 before anything else happens, so nothing of it reaches an upstream.

use mcpb_config::http::HttpSettings;
use subtle::ConstantTimeEq;

/// One configured token, resolved when the daemon started.
pub(crate) struct Token {
    secret: String,
    pub(crate) profile: String,
    pub(crate) sessions: std::sync::Arc<tokio::sync::Semaphore>,
    pub(crate) in_flight: std::sync::Arc<tokio::sync::Semaphore>,
}

pub(crate) struct Gate {
    pub(crate) tokens: Vec<Token>,
    hosts: Vec<String>,
    origins: Vec<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 403: a Host or Origin this listener does not serve.
    Forbidden(String),
    /// 401: no token, or not one of ours.
    Unauthorized,
}

impl Gate {
    /// Resolves every token's reference; an unresolvable one stops the daemon's start.
    pub(crate) fn new(
        http: &HttpSettings,
        port: u16,
        env: &dyn Fn(&str) -> Option<String>,
        secrets_dir: &std::path::Path,
    ) -> Result<Self, String> {
        let mut tokens = Vec::new();
        for (i, t) in http.tokens.iter().enumerate() {
            let secret = t
                .token
                .resolve(env, secrets_dir)
                .map_err(|e| format!("http.tokens[{i}]: {e}"))?;
            if secret.len() < 16 {
                return Err(format!(
                    "http.tokens[{i}]: the token is {} characters long; use at least 16 (e.g. `openssl rand -hex 32`)",
                    secret.len()
                ));
            }
            tokens.push(Token {
                secret,
                profile: t.profile.clone(),
                sessions: std::sync::Arc::new(tokio::sync::Semaphore::new(t.max_sessions as usize)),
                in_flight: std::sync::Arc::new(tokio::sync::Semaphore::new(
                    t.max_in_flight as usize,
                )),
            });
        }
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("{h}:{port}"))
            .collect();
        hosts.extend(http.allowed_hosts.iter().cloned());
        Ok(Self {
            tokens,
            hosts,
            origins: http.allowed_origins.clone(),
        })
    }

    /// The index of the request's token, or why it is refused.
    pub(crate) fn admit(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<usize, Refusal> {
        self.place(host, origin)?;
        let presented = authorization
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(Refusal::Unauthorized)?;
        // Every token is compared, so the time taken says nothing about which one is close.
        let mut found = None;
        for (i, t) in self.tokens.iter().enumerate() {
            if bool::from(t.secret.as_bytes().ct_eq(presented.as_bytes())) {
                found = Some(i);
            }
        }
        found.ok_or(Refusal::Unauthorized)
    }

    /// Whether the Host names this listener and the Origin (when there is one) may call it:
    /// all a browser's preflight is judged by, since it carries no token.
    pub(crate) fn place(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Refusal> {
        let host = host.unwrap_or("");
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(Refusal::Forbidden(format!(
                "Host {host:?} is not served here"
            )));
        }
        if let Some(o) = origin
            && !self.origins.iter().any(|a| a == o)
            && !loopback_origin(o)
        {
            return Err(Refusal::Forbidden(format!("Origin {o:?} is not allowed")));
        }
        Ok(())
    }
}

/// A page served from this machine's loopback (a local tool's web UI): it still needs a token.
fn loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if authority.starts_with('[') {
        authority.split_inclusive(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    let port_ok = authority[host.len()..]
        .strip_prefix(':')
        .is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok
        && authority.len() >= host.len()
        && matches!(host, "localhost" | "127.0.0.1" | "[::1]")
        && (authority.len() == host.len() || authority.as_bytes()[host.len()] == b':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpb_config::template::Template;

    fn settings(origins: &[&str], hosts: &[&str]) -> HttpSettings {
        HttpSettings {
            listen: "127.0.0.1:9".into(),
            path: "/mcp".into(),
            tokens: vec![mcpb_config::http::HttpToken {
                token: Template::parse("${TOK}").unwrap(),
                profile: "p".into(),
                max_sessions: 2,
                max_in_flight: 2,
            }],
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            session_idle_ms: 1000,
        }
    }

    fn gate() -> Gate {
        let http = settings(&["http://localhost:5173"], &["broker.internal"]);
        let env = |n: &str| (n == "TOK").then(|| "0123456789abcdef0123".to_string());
        Gate::new(&http, 9, &env, std::path::Path::new("/nonexistent")).unwrap()
    }

    #[test]
    fn host_origin_and_token_are_all_checked() {
        let g = gate();
        let ok = Some("Bearer 0123456789abcdef0123");
        assert_eq!(g.admit(Some("127.0.0.1:9"), None, ok), Ok(0));
        assert_eq!(
            g.admit(Some("broker.internal"), Some("http://localhost:5173"), ok),
            Ok(0)
        );
        assert!(matches!(
            g.admit(Some("evil.example:9"), None, ok),
            Err(Refusal::Forbidden(_))
        ));
        assert!(matches!(
            g.admit(None, None, ok),
            Err(Refusal::Forbidden(_))
        ));
        assert!(matches!(
            g.admit(Some("localhost:9"), Some("http://evil.example"), ok),
            Err(Refusal::Forbidden(_))
        ));
        for local in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
        ] {
            assert_eq!(
                g.admit(Some("localhost:9"), Some(local), ok),
                Ok(0),
                "{local}"
            );
        }
        for foreign in [
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io:80",
            "null",
            "file://",
        ] {
            assert!(
                g.admit(Some("localhost:9"), Some(foreign), ok).is_err(),
                "{foreign}"
            );
        }
        assert_eq!(
            g.admit(Some("localhost:9"), None, None),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            g.admit(
                Some("localhost:9"),
                None,
                Some("Bearer 0123456789abcdef012")
            ),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            g.admit(Some("localhost:9"), None, Some("Basic x")),
            Err(Refusal::Unauthorized)
        );
    }

    #[test]
    fn short_or_unset_tokens_stop_the_start() {
        let http = settings(&[], &[]);
        let unset = |_: &str| None;
        assert!(Gate::new(&http, 9, &unset, std::path::Path::new("/x")).is_err());
        let short = |_: &str| Some("abc".to_string());
        let err = Gate::new(&http, 9, &short, std::path::Path::new("/x"))
            .err()
            .unwrap();
        assert!(err.contains("at least 16"), "{err}");
    }
}
