//! What reads like a credential in a client's server entry: values, keys, arguments and
//! URLs. The scan (what stays in the client) and the plan (what moves into `secrets/`) ask the
//! same questions here.

use mcpb_config::template::looks_like_credential;

/// Whether a value reads like a credential: long, no spaces, letters and digits mixed, and
/// not a path or an address; or an address with a password in it (`scheme://user:pw@host`).
pub(crate) fn secret_looking(value: &str) -> bool {
    let token = value.len() >= 16
        && !value.contains(' ')
        && !value.contains('/')
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic());
    token || userinfo_password(value)
}

/// `scheme://user:password@host…`.
pub(crate) fn userinfo_password(value: &str) -> bool {
    value.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(user, _)| user.contains(':'))
    })
}

/// Whether one argument carries a credential on its own: a token, a URL with one, or a
/// header as `mcp-remote --header` and `curl -H` take it (`Authorization: Bearer …`).
pub(crate) fn arg_secret(a: &str) -> bool {
    let header = a.split_once(':').is_some_and(|(name, value)| {
        !name.contains(' ') && credential_key(name) && !value.trim().is_empty()
    });
    secret_looking(a) || header || (a.contains("://") && url_secret(a))
}

/// Whether a key names a credential: the config's own rule, and the other spellings servers
/// use (`DB_PASS`, `PASSWD`, `API_KEY`, `CLIENT_SECRET`, `AUTH`…).
pub(crate) fn credential_key(key: &str) -> bool {
    let k = key.to_ascii_uppercase().replace('-', "_");
    looks_like_credential(key)
        || [
            "PASS",
            "PWD",
            "SECRET",
            "TOKEN",
            "APIKEY",
            "API_KEY",
            "CREDENTIAL",
            "AUTH",
            "PRIVATE",
        ]
        .iter()
        .any(|w| k.contains(w))
}

/// Whether a URL carries a credential: a password, a query value or key that looks like
/// one, or a path segment that does (`/s/<token>/mcp`).
pub(crate) fn url_secret(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.split_once('/').map_or("", |(_, p)| p);
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    userinfo_password(url)
        || path.split('/').any(secret_looking)
        || query.split('&').any(|kv| {
            kv.split_once('=').is_some_and(|(k, v)| {
                let k = k.to_ascii_uppercase();
                credential_key(&k)
                    || matches!(k.as_str(), "KEY" | "SIG" | "SIGNATURE" | "PW" | "CODE")
                    || secret_looking(v)
            })
        })
}
