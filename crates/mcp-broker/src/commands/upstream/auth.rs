//! `mcp-broker auth login|logout|status`: signing in to remote upstreams that ask for OAuth.
//! The authorization URL is the command's data (stdout); everything else goes to stderr.

use std::process::ExitCode;
use std::time::Duration;

use mcpb_config::{OAuthGrant, Settings, UpstreamSettings};
use mcpb_oauth::{FileStore, LoginOptions};

use crate::cli::AuthCommand;
use crate::fail;

fn remote<'a>(settings: &'a Settings, name: &str) -> Result<&'a UpstreamSettings, ExitCode> {
    let Some(up) = settings.upstreams.get(name) else {
        let known: Vec<&str> = settings
            .upstreams
            .values()
            .filter(|u| u.transport.is_remote())
            .map(|u| u.name.as_str())
            .collect();
        let hint = format!("remote upstreams here: {}", known.join(", "));
        return Err(fail(
            &format!("mcp-broker: no upstream named {name:?}"),
            &[&hint],
        ));
    };
    if up.transport.is_local_process() {
        return Err(fail(
            &format!("mcp-broker: {name} is a local process; only remote upstreams sign in"),
            &["a local server's credentials go in its env: with ${ENV} references"],
        ));
    }
    Ok(up)
}

fn store(settings: &Settings, name: &str) -> FileStore {
    FileStore::for_upstream(&settings.runtime.state_dir(), name)
}

pub(crate) async fn login(
    settings: &Settings,
    name: &str,
    scopes: Vec<String>,
    timeout_s: u64,
) -> anyhow::Result<()> {
    let up = remote(settings, name).map_err(|_| anyhow::anyhow!("cannot sign in"))?;
    let url = up.url.clone().unwrap_or_default();
    let oauth = up.oauth.clone();
    let lookup = |k: &str| std::env::var(k).ok();
    let secret = match oauth.as_ref().and_then(|o| o.client_secret.as_ref()) {
        Some(t) => Some(
            t.resolve(&lookup, &settings.runtime.secrets_dir())
                .map_err(|e| anyhow::anyhow!("upstreams.{name}.oauth.client_secret: {e}"))?,
        ),
        None => None,
    };
    let mut scopes = scopes;
    if scopes.is_empty() {
        scopes = oauth.as_ref().map(|o| o.scopes.clone()).unwrap_or_default();
    }
    let store = store(settings, name);
    if let Some(o) = oauth
        .as_ref()
        .filter(|o| o.grant == OAuthGrant::ClientCredentials)
    {
        let id = o.client_id.clone().unwrap_or_default();
        mcpb_oauth::client_credentials(&url, store, &id, &secret.unwrap_or_default(), &scopes)
            .await?;
        errln!("signed in to {name} with its client credentials");
        return Ok(());
    }
    let opts = LoginOptions {
        client_id: oauth.as_ref().and_then(|o| o.client_id.clone()),
        client_secret: secret,
        client_metadata_url: oauth.as_ref().and_then(|o| o.client_metadata_url.clone()),
        scopes,
        timeout: Duration::from_secs(timeout_s),
    };
    mcpb_oauth::login(&url, store, &opts, |auth_url| {
        errln!("open this address in a browser to sign in to {name} (waiting {timeout_s} s):");
        outln!("{auth_url}");
    })
    .await?;
    errln!("signed in to {name}; the daemon uses it from the upstream's next start");
    Ok(())
}

pub(crate) fn logout(settings: &Settings, name: &str) -> ExitCode {
    if let Err(code) = remote(settings, name) {
        return code;
    }
    let store = store(settings, name);
    match std::fs::remove_file(store.path()) {
        Ok(()) => {
            errln!("signed out of {name}");
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            errln!("{name} was not signed in");
            ExitCode::SUCCESS
        }
        Err(e) => fail(
            &format!("mcp-broker: cannot remove {}: {e}", store.path().display()),
            &[],
        ),
    }
}

/// Each remote upstream: whether a sign-in is kept for it.
pub(crate) fn status(settings: &Settings, json: bool) -> ExitCode {
    let rows: Vec<(String, bool, bool)> = settings
        .upstreams
        .values()
        .filter(|u| u.transport.is_remote())
        .map(|u| {
            let static_auth = u
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"));
            (
                u.name.clone(),
                store(settings, &u.name).exists(),
                static_auth,
            )
        })
        .collect();
    if json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|(n, signed, header)| {
                serde_json::json!({"upstream": n, "signed_in": signed, "authorization_header": header})
            })
            .collect();
        outln!("{}", serde_json::Value::Array(items));
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        errln!("no remote upstreams in the configuration");
        return ExitCode::SUCCESS;
    }
    outln!("{:<24} SIGN-IN", "UPSTREAM");
    for (name, signed, header) in rows {
        let state = match (signed, header) {
            (_, true) => "Authorization header from the config",
            (true, false) => "signed in",
            (false, false) => "none (mcp-broker auth login NAME, if it asks for one)",
        };
        outln!("{name:<24} {state}");
    }
    ExitCode::SUCCESS
}

/// `mcp-broker auth …`.
pub(crate) fn run(s: &Settings, command: AuthCommand) -> ExitCode {
    match command {
        AuthCommand::Login {
            upstream,
            scopes,
            timeout_s,
        } => crate::run_async(login(s, &upstream, scopes, timeout_s)),
        AuthCommand::Logout { upstream } => logout(s, &upstream),
        AuthCommand::Status { json } => status(s, json),
    }
}
