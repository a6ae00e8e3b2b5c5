//! The environment a child gets: nothing of the daemon's but an allowlist, plus its own config.

use std::collections::BTreeMap;
use std::path::Path;

use mcpb_config::UpstreamSettings;

use crate::UpstreamError;

/// Variables passed through from the daemon's environment when set. Everything else (tokens of
/// other tools, the user's shell secrets) stays out of upstream processes.
pub const BASE_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "TERM",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// Used when the daemon itself was started without PATH (some clients pass only HOME), so that
/// `npx` or `uvx` can still be found.
pub(crate) const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Builds the child's complete environment. Secret references are resolved here and nowhere else.
pub(crate) fn child_env(
    settings: &UpstreamSettings,
    passthrough: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    secrets_dir: &Path,
) -> Result<BTreeMap<String, String>, UpstreamError> {
    let mut env = BTreeMap::new();
    for key in BASE_ALLOWLIST
        .iter()
        .copied()
        .chain(passthrough.iter().map(String::as_str))
    {
        if let Some(v) = lookup(key) {
            env.insert(key.to_string(), v);
        }
    }
    env.entry("PATH".to_string())
        .or_insert_with(|| FALLBACK_PATH.to_string());
    for (key, template) in &settings.env {
        let value = template
            .resolve(lookup, secrets_dir)
            .map_err(|e| UpstreamError::Secret {
                upstream: settings.name.clone(),
                key: key.clone(),
                reason: e.to_string(),
            })?;
        env.insert(key.clone(), value);
    }
    Ok(env)
}
