//! Who may use the console. Three checks, all before a page is built:
//! - the Host header names this listener on loopback (DNS rebinding), and an Origin, when a
//!   browser sends one, is this listener's own (the HTTP front's rule, with no list to widen);
//! - the per-console key, given in the URL `mcp-broker console` prints, is traded for the
//!   session's path: every page lives under `/s/<session>/`, compared in constant time on every
//!   request. Not a cookie: cookies are not kept apart by port, so a browser would hand one to
//!   any other server on 127.0.0.1; a path reaches no other origin (links are relative, the
//!   Referer stays on this origin);
//! - every action (a POST) carries the page's CSRF token, also compared in constant time, and an
//!   action a browser marks as coming from another site is refused whatever it carries.

use subtle::ConstantTimeEq;

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
    session: String,
    csrf: String,
    hosts: Vec<String>,
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
    /// New secrets for a listener bound to `addr`: each console start has its own.
    pub fn new(addr: std::net::SocketAddr) -> Self {
        Self::with_secrets(addr, random_token(), random_token(), random_token())
    }

    pub(crate) fn with_secrets(
        addr: std::net::SocketAddr,
        secret: String,
        session: String,
        csrf: String,
    ) -> Self {
        let port = addr.port();
        // The address it is bound to first: the URL names it.
        let own = match addr.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]:{port}"),
            std::net::IpAddr::V4(ip) => format!("{ip}:{port}"),
        };
        let mut hosts = vec![own];
        for h in ["127.0.0.1", "localhost", "[::1]"] {
            let h = format!("{h}:{port}");
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
        Self {
            secret,
            session,
            csrf,
            hosts,
        }
    }

    /// The address to open: it carries the key, which the console trades for the session's
    /// path.
    pub fn login_url(&self) -> String {
        format!("http://{}/login?key={}", self.hosts[0], self.secret)
    }

    /// Where the pages are: `/s/<session>/`.
    pub fn home(&self) -> String {
        format!("/s/{}/", self.session)
    }

    /// The page path of a request under the session's path (`/servers` of
    /// `/s/<session>/servers`), or None when it is not under it.
    pub fn page<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix("/s/")?;
        let (session, page) = rest.split_at(rest.find('/')?);
        same(session, &self.session).then_some(page)
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

    /// Whether an action's form carries the CSRF token.
    pub fn csrf_ok(&self, token: Option<&str>) -> bool {
        token.is_some_and(|t| same(t, &self.csrf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        let addr = "127.0.0.1:9".parse().unwrap();
        Access::with_secrets(addr, "s".repeat(64), "p".repeat(64), "c".repeat(64))
    }

    #[test]
    fn an_ipv6_console_names_its_own_address() {
        let a = Access::new("[::1]:7".parse().unwrap());
        assert!(a.login_url().starts_with("http://[::1]:7/login?key="));
        assert_eq!(a.place(Some("127.0.0.1:7"), None, None), Ok(()));
        assert_eq!(
            a.place(Some("[::1]:7"), Some("http://[::1]:7"), None),
            Ok(())
        );
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
        let home = a.home();
        assert_eq!(home, format!("/s/{}/", "p".repeat(64)));
        assert_eq!(a.page(&format!("{home}servers")), Some("/servers"));
        assert_eq!(a.page(&home), Some("/"));
        assert_eq!(a.page(&format!("/s/{}/servers", "p".repeat(63))), None);
        assert_eq!(a.page(&format!("/s/{}/servers", "s".repeat(64))), None);
        assert_eq!(a.page(&format!("/s/{}", "p".repeat(64))), None);
        assert_eq!(a.page("/servers"), None);
        assert!(a.csrf_ok(Some(&"c".repeat(64))));
        assert!(!a.csrf_ok(Some(&"s".repeat(64))));
        assert!(!a.csrf_ok(None));
        assert!(a.login_url().starts_with("http://127.0.0.1:9/login?key="));
    }

    #[test]
    fn each_console_has_its_own_secrets() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let (a, b) = (Access::new(addr), Access::new(addr));
        assert_ne!(a.login_url(), b.login_url());
        assert_ne!(a.home(), b.home());
        assert_ne!(a.csrf(), b.csrf());
        assert_eq!(a.csrf().len(), 64);
    }
}
