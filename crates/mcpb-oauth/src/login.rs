//! Signing in to a remote upstream once, from the command line: the server's 401 names what to
//! ask for, the SDK discovers the authorization server, registers (or uses the configured
//! client) and builds the PKCE authorization URL; the person opens it, and the redirect comes
//! back to a listener of ours on loopback. Or, without a person, the client-credentials grant.

use std::time::Duration;

use rmcp::transport::auth::{AuthorizationRequest, ClientCredentialsConfig, OAuthState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::{FileStore, OAuthError};

/// What the configuration says of the client; all optional (registration is dynamic then).
#[derive(Debug, Clone, Default)]
pub struct LoginOptions {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// An HTTPS URL of this client's metadata document (CIMD), used as its client id where
    /// the authorization server takes one.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: what the server's challenge or metadata suggests.
    pub scopes: Vec<String>,
    /// How long the person has to finish signing in.
    pub timeout: Duration,
}

/// The server's `WWW-Authenticate` challenge to an unauthenticated `initialize`, if any.
async fn challenge(url: &str) -> Result<Option<String>, OAuthError> {
    crate::tls();
    let unreachable = |e: reqwest::Error| OAuthError::Unreachable {
        url: url.to_string(),
        reason: e.to_string(),
    };
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "mcp-broker", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(unreachable)?
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .map_err(unreachable)?;
    // A server may let `initialize` through and ask for a sign-in only later: a success
    // carries no challenge, and discovery starts from the server's well-known addresses.
    if resp.status().is_success() {
        return Ok(None);
    }
    Ok(resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string))
}

/// Signs in to the server at `url` and keeps the tokens in `store`. `show` is given the
/// authorization URL for the person to open; the call returns once the redirect came back and
/// the code was exchanged, or after `opts.timeout`.
pub async fn login(
    url: &str,
    store: FileStore,
    opts: &LoginOptions,
    show: impl FnOnce(&str),
) -> Result<(), OAuthError> {
    let challenge = challenge(url).await?;
    let io = |what: &str| {
        let what = what.to_string();
        move |source| OAuthError::Io { what, source }
    };
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(io("cannot listen on loopback for the redirect"))?;
    let port = listener
        .local_addr()
        .map_err(io("cannot listen on loopback for the redirect"))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let mut state = OAuthState::new(url, None).await?;
    if let OAuthState::Unauthorized(manager) = &mut state {
        manager.set_credential_store(store);
    }
    let mut request = AuthorizationRequest::new(&redirect).with_client_name("mcp-broker");
    if let Some(c) = challenge {
        request = request.with_challenge(c);
    }
    request = if opts.scopes.is_empty() {
        request.with_initial_scope_selection()
    } else {
        request.with_scopes(opts.scopes.clone())
    };
    if let Some(id) = &opts.client_id {
        request = request.with_preregistered_client(id);
    }
    if let Some(secret) = &opts.client_secret {
        request = request.with_client_secret(secret);
    }
    if let Some(u) = &opts.client_metadata_url {
        request = request.with_client_metadata_url(u);
    }
    state.start_authorization(request).await?;
    let address = state.get_authorization_url().await?;
    // The redirect must carry the state this address gave out; anything else on the port (a
    // forged callback, a probe) is turned away and the wait goes on.
    let expected = query_value(&address, "state").unwrap_or_default();
    show(&address);
    let secs = opts.timeout.as_secs();
    let callback = tokio::time::timeout(opts.timeout, redirected(&listener, port, expected))
        .await
        .map_err(|_| OAuthError::TimedOut { secs })??;
    state.handle_callback_url(&callback).await?;
    Ok(())
}

/// The client-credentials grant (no person involved); the token goes to `store`.
pub async fn client_credentials(
    url: &str,
    store: FileStore,
    client_id: &str,
    client_secret: &str,
    scopes: &[String],
) -> Result<(), OAuthError> {
    crate::tls();
    let mut state = OAuthState::new(url, None).await?;
    if let OAuthState::Unauthorized(manager) = &mut state {
        manager.set_credential_store(store);
    }
    state
        .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
            client_id: client_id.to_string(),
            client_secret: client_secret.to_string(),
            scopes: scopes.to_vec(),
            resource: Some(url.to_string()),
        })
        .await?;
    Ok(())
}

/// Bytes of a redirect request we read at most: a request line with a code and a state.
const MAX_REQUEST: usize = 16 * 1024;

/// The value of `key` in a URL's query, as written (still percent-encoded).
fn query_value<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    url.split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// How long one connection to the redirect listener may take to send its request.
const REQUEST_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits for the browser's redirect to `/callback` with the expected `state` and answers it;
/// the full URL it asked for. Each connection is served on its own, so one that sends nothing
/// holds nothing up; anything else on the port (a favicon, a probe, a callback with another
/// state) gets a 4xx and the wait goes on. A refusal from the authorization server ends it.
async fn redirected(
    listener: &TcpListener,
    port: u16,
    expected_state: &str,
) -> Result<String, OAuthError> {
    let (done, mut outcome) = tokio::sync::mpsc::channel::<Result<String, OAuthError>>(1);
    loop {
        let conn = tokio::select! {
            got = outcome.recv() => {
                if let Some(result) = got {
                    return result;
                }
                continue;
            }
            conn = listener.accept() => conn,
        };
        let (conn, _) = conn.map_err(|source| OAuthError::Io {
            what: "the redirect listener failed".into(),
            source,
        })?;
        let (done, expected) = (done.clone(), expected_state.to_string());
        tokio::spawn(async move {
            if let Some(result) = serve(conn, port, &expected).await {
                let _ = done.send(result).await;
            }
        });
    }
}

/// One connection to the redirect listener: `Some` when it was the redirect.
async fn serve(
    mut conn: tokio::net::TcpStream,
    port: u16,
    expected_state: &str,
) -> Option<Result<String, OAuthError>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let _ = tokio::time::timeout(REQUEST_TIME, async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    let head = String::from_utf8_lossy(&buf);
    let target = head
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GET "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("");
    let plain = |status: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    };
    if !target.starts_with("/callback?") {
        let _ = conn.write_all(plain("404 Not Found").as_bytes()).await;
        return None;
    }
    if expected_state.is_empty() || query_value(target, "state") != Some(expected_state) {
        let _ = conn.write_all(plain("400 Bad Request").as_bytes()).await;
        return None;
    }
    let refused = query_value(target, "error").is_some();
    let page = if refused {
        "mcp-broker: the sign-in was refused; see the terminal.\n"
    } else {
        "mcp-broker: signed in; you can close this page.\n"
    };
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = conn.write_all(answer.as_bytes()).await;
    if refused {
        let why = query_value(target, "error_description")
            .or_else(|| query_value(target, "error"))
            .unwrap_or("unknown");
        return Some(Err(OAuthError::Refused(why.to_string())));
    }
    Some(Ok(format!("http://127.0.0.1:{port}{target}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn send(port: u16, target: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        s.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        out
    }

    #[tokio::test]
    async fn only_the_redirect_with_its_state_ends_the_wait() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting = tokio::spawn(async move { redirected(&listener, port, "s3cr3t").await });
        // An idle connection, a probe, a forged callback and one of another state are turned
        // away; the wait goes on.
        let _idle = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        assert!(send(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
        assert!(
            send(port, "/callback?code=forged")
                .await
                .starts_with("HTTP/1.1 400")
        );
        assert!(
            send(port, "/callback?code=x&state=other")
                .await
                .starts_with("HTTP/1.1 400")
        );
        assert!(!waiting.is_finished());
        let ok = send(port, "/callback?code=real&state=s3cr3t").await;
        assert!(ok.contains("signed in"), "{ok}");
        let url = waiting.await.unwrap().unwrap();
        assert_eq!(
            url,
            format!("http://127.0.0.1:{port}/callback?code=real&state=s3cr3t")
        );
    }

    #[test]
    fn query_values_are_found_by_their_whole_key() {
        let u = "https://as/authorize?response_type=code&xstate=no&state=abc%3D&scope=a";
        assert_eq!(query_value(u, "state"), Some("abc%3D"));
        assert_eq!(query_value(u, "nope"), None);
    }
}
