//! Who may use the console. Three checks, all before a page is built:
//! - the Host header names this listener on loopback (DNS rebinding), and an Origin, when a
//!   browser sends one, is this listener's own (the HTTP front's rule, with no list to widen);
//! - the per-daemon secret: given once in the URL `mcp-broker console` prints, traded for an
//!   HttpOnly, SameSite=Strict cookie, and compared in constant time on every request;
//! - every action (a POST) carries the page's CSRF token, also compared in constant time, and a
//!   request a browser marks as cross-site is refused whatever it carries.

use subtle::ConstantTimeEq;

/// The cookie the secret is kept in.
pub const COOKIE: &str = "mcpb_console";
/// The form field every action carries.
pub const CSRF_FIELD: &str = "csrf";

/// Why a request is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// 403: not this listener's Host, a foreign Origin, a cross-site request, no CSRF token.
    Forbidden(String),
    /// 401: no secret, or not this daemon's.
    Unauthorized,
}

pub struct Access {
    secret: String,
    csrf: String,
    hosts: [String; 3],
}

/// 244 random bits (two version-4 UUIDs) as 64 hex digits.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Access {
    /// New secrets for a listener on `port`: each daemon start (each console start) has its own.
    pub fn new(port: u16) -> Self {
        Self::with_secrets(port, random_token(), random_token())
    }

    pub(crate) fn with_secrets(port: u16, secret: String, csrf: String) -> Self {
        Self {
            secret,
            csrf,
            hosts: [
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ],
        }
    }

    /// The address to open: it carries the secret, which the page trades for a cookie.
    pub fn login_url(&self) -> String {
        format!("http://{}/login?key={}", self.hosts[0], self.secret)
    }

    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The Host, Origin and Sec-Fetch-Site checks.
    pub fn place(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        fetch_site: Option<&str>,
    ) -> Result<(), Denied> {
        let host = host.unwrap_or("");
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(Denied::Forbidden(format!(
                "Host {host:?} is not served here"
            )));
        }
        if let Some(o) = origin
            && !self
                .hosts
                .iter()
                .any(|h| o.eq_ignore_ascii_case(&format!("http://{h}")))
        {
            return Err(Denied::Forbidden(format!("Origin {o:?} is not allowed")));
        }
        if fetch_site == Some("cross-site") || fetch_site == Some("same-site") {
            return Err(Denied::Forbidden(
                "a request from another site is not served".into(),
            ));
        }
        Ok(())
    }

    /// Whether `key` is this daemon's secret.
    pub fn key_ok(&self, key: &str) -> bool {
        same(key, &self.secret)
    }

    /// Whether the request's Cookie header carries the secret.
    pub fn cookie_ok(&self, cookie_header: Option<&str>) -> bool {
        let Some(header) = cookie_header else {
            return false;
        };
        let mut found = false;
        for pair in header.split(';') {
            if let Some((name, value)) = pair.trim().split_once('=')
                && name == COOKIE
                && same(value, &self.secret)
            {
                found = true;
            }
        }
        found
    }

    /// Whether an action's form carries the CSRF token.
    pub fn csrf_ok(&self, token: Option<&str>) -> bool {
        token.is_some_and(|t| same(t, &self.csrf))
    }

    /// The Set-Cookie value that keeps the secret for later requests (for this browser
    /// session only, unreadable by scripts, never sent along from another site).
    pub fn set_cookie(&self) -> String {
        format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
            self.secret
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        Access::with_secrets(9, "s".repeat(64), "c".repeat(64))
    }

    #[test]
    fn host_must_name_this_listener() {
        let a = access();
        assert_eq!(a.place(Some("127.0.0.1:9"), None, None), Ok(()));
        assert_eq!(a.place(Some("LOCALHOST:9"), None, None), Ok(()));
        assert_eq!(a.place(Some("[::1]:9"), None, None), Ok(()));
        for bad in [
            None,
            Some("127.0.0.1:10"),
            Some("evil.example:9"),
            Some("127.0.0.1"),
        ] {
            assert!(matches!(
                a.place(bad, None, None),
                Err(Denied::Forbidden(_))
            ));
        }
    }

    #[test]
    fn origin_must_be_our_own_and_not_cross_site() {
        let a = access();
        let h = Some("127.0.0.1:9");
        assert_eq!(a.place(h, Some("http://127.0.0.1:9"), None), Ok(()));
        assert_eq!(
            a.place(h, Some("http://localhost:9"), Some("same-origin")),
            Ok(())
        );
        assert_eq!(a.place(h, None, Some("none")), Ok(()));
        for o in [
            "http://127.0.0.1:10",
            "https://127.0.0.1:9",
            "null",
            "http://evil.example",
        ] {
            assert!(a.place(h, Some(o), None).is_err(), "{o}");
        }
        assert!(a.place(h, None, Some("cross-site")).is_err());
        assert!(a.place(h, None, Some("same-site")).is_err());
    }

    #[test]
    fn the_secret_and_the_csrf_token_must_match_whole() {
        let a = access();
        assert!(a.key_ok(&"s".repeat(64)));
        assert!(!a.key_ok(&"s".repeat(63)));
        assert!(!a.key_ok(""));
        let cookie = format!("other=1; {COOKIE}={}", "s".repeat(64));
        assert!(a.cookie_ok(Some(&cookie)));
        assert!(!a.cookie_ok(Some(&format!("{COOKIE}={}", "s".repeat(65)))));
        assert!(!a.cookie_ok(Some("x=1")));
        assert!(!a.cookie_ok(None));
        assert!(a.csrf_ok(Some(&"c".repeat(64))));
        assert!(!a.csrf_ok(Some(&"s".repeat(64))));
        assert!(!a.csrf_ok(None));
        assert!(a.set_cookie().contains("HttpOnly; SameSite=Strict"));
        assert!(a.login_url().starts_with("http://127.0.0.1:9/login?key="));
    }

    #[test]
    fn each_console_has_its_own_secrets() {
        let (a, b) = (Access::new(1), Access::new(1));
        assert_ne!(a.login_url(), b.login_url());
        assert_ne!(a.csrf(), b.csrf());
        assert_eq!(a.csrf().len(), 64);
    }
}
