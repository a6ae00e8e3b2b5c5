//! OAuth 2.1 for remote upstreams, on the official SDK's client (rmcp's `auth`): signing in
//! once from the command line (`mcp-broker auth login`: discovery from the server's 401,
//! registration, PKCE, a loopback redirect), or without a person (client credentials); the
//! tokens kept per upstream in a private file; and, for the daemon, the current access token,
//! refreshed when it runs out. It owns the token files under `state/oauth/`; it never starts
//! an upstream and never sees an MCP message.

#![forbid(unsafe_code)]

mod error;
mod login;
mod store;
mod token;

pub use error::OAuthError;
pub use login::{LoginOptions, client_credentials, login};
pub use store::{FileStore, TokenState};
pub use token::Bearer;

/// reqwest is built without a bundled TLS provider; ring is the workspace's. A second install
/// fails harmlessly.
fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
