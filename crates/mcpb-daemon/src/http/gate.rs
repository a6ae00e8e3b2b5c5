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
    loopback_origins: bool,
}

/// The least entropy a token may carry, in bits: what `openssl rand -hex 16` gives.
const MIN_TOKEN_BITS: f64 = 128.0;

/// An upper bound on the entropy of `token` in bits, from the alphabet its characters come
/// from and its length, lowered for repeats: 32 hex digits give 128, 22 base64 characters 132,
/// "aaaaaaaaaaaaaaaa" almost nothing.
fn entropy_bits(token: &str) -> f64 {
    let chars: Vec<char> = token.chars().collect();
    let alphabet = {
        let lower = chars.iter().any(char::is_ascii_lowercase);
        let upper = chars.iter().any(char::is_ascii_uppercase);
        let digit = chars.iter().any(char::is_ascii_digit);
        let other = chars.iter().any(|c| !c.is_ascii_alphanumeric());
        let hex_only = chars.iter().all(char::is_ascii_hexdigit);
        if hex_only {
            16.0
        } else {
            f64::from(u8::from(lower) * 26 + u8::from(upper) * 26 + u8::from(digit) * 10)
                + if other { 32.0 } else { 0.0 }
        }
    };
    // A token whose characters are far less varied than random ones of its length would be
    // ("password-password", "abab...") is counted by its own Shannon entropy instead.
    let mut counts = std::collections::HashMap::new();
    for c in &chars {
        *counts.entry(*c).or_insert(0usize) += 1;
    }
    let n = chars.len() as f64;
    let shannon: f64 = counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum();
    let alphabet_bits = alphabet.max(2.0).log2();
    let expected = alphabet_bits.min(n.log2());
    let per_char = if shannon >= 0.7 * expected {
        alphabet_bits
    } else {
        shannon
    };
    per_char * n
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
        let mut tokens: Vec<Token> = Vec::new();
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
            let bits = entropy_bits(&secret);
            if bits < MIN_TOKEN_BITS {
                return Err(format!(
                    "http.tokens[{i}]: the token carries about {bits:.0} bits of entropy; use at least {MIN_TOKEN_BITS:.0} (e.g. `openssl rand -hex 32`)"
                ));
            }
            if let Some(j) = tokens.iter().position(|o| o.secret == secret) {
                return Err(format!(
                    "http.tokens[{i}] is the same token as http.tokens[{j}]: a token names one profile; give each its own"
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
            loopback_origins: http.allow_loopback_origins,
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
            && !(self.loopback_origins && loopback_origin(o))
        {
            return Err(Refusal::Forbidden(format!("Origin {o:?} is not allowed")));
        }
        Ok(())
    }
}

/// A page served from this machine's loopback (a local tool's web UI), accepted only with
/// `allow_loopback_origins`: it still needs a token.
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
            allow_loopback_origins: false,
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            session_idle_ms: 1000,
        }
    }

    const TOKEN: &str = "3f9c2a7b8e1d4c6f0a5b9e2d7c4f1a8b";

    fn gate() -> Gate {
        let http = settings(&["http://localhost:5173"], &["broker.internal"]);
        let env = |n: &str| (n == "TOK").then(|| TOKEN.to_string());
        Gate::new(&http, 9, &env, std::path::Path::new("/nonexistent")).unwrap()
    }

    #[test]
    fn host_origin_and_token_are_all_checked() {
        let g = gate();
        let ok = Some("Bearer 3f9c2a7b8e1d4c6f0a5b9e2d7c4f1a8b");
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
        // A loopback page is an origin like any other: listed, or allowed on purpose.
        let mut open = gate();
        open.loopback_origins = true;
        for local in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
        ] {
            assert!(
                matches!(
                    g.admit(Some("localhost:9"), Some(local), ok),
                    Err(Refusal::Forbidden(_))
                ),
                "{local}"
            );
            assert_eq!(
                open.admit(Some("localhost:9"), Some(local), ok),
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
                Some("Bearer 3f9c2a7b8e1d4c6f0a5b9e2d7c4f1a8")
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

    #[test]
    fn weak_or_shared_tokens_stop_the_start() {
        for weak in [
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "0123456789abcdef",
            "password-password-password",
            "abababababababababababababababab",
        ] {
            let env = |_: &str| Some(weak.to_string());
            let err = Gate::new(&settings(&[], &[]), 9, &env, std::path::Path::new("/x"))
                .err()
                .unwrap();
            assert!(err.contains("bits of entropy"), "{weak}: {err}");
        }
        for strong in [
            TOKEN,
            "Zm9vYmFyYmF6cXV4LXNlY3JldC0xMjM0NQ",
            "q8Vf2mKp9XzL4tRw7BnY3cHs",
        ] {
            let env = |_: &str| Some(strong.to_string());
            assert!(
                Gate::new(&settings(&[], &[]), 9, &env, std::path::Path::new("/x")).is_ok(),
                "{strong}"
            );
        }
        let mut two = settings(&[], &[]);
        let mut second = two.tokens[0].clone();
        second.profile = "q".into();
        two.tokens.push(second);
        let env = |_: &str| Some(TOKEN.to_string());
        let err = Gate::new(&two, 9, &env, std::path::Path::new("/x"))
            .err()
            .unwrap();
        assert!(err.contains("same token"), "{err}");
    }
}
