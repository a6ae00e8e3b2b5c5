//! One upstream's credentials in a private file: written whole (temporary file, then rename),
//! readable by the user alone. The tokens are never logged. What was read is kept while the
//! file's modification time stays the same: the SDK loads credentials for every request, and a
//! sign-in from the command line replaces the file under a running daemon.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use parking_lot::Mutex;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

/// An upstream's stored sign-in as `broker.status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TokenState {
    /// When the access token runs out (`None`: the server did not say).
    pub expires_at_unix: Option<u64>,
    pub expired: bool,
    /// A refresh token is kept: an expired access token is renewed without a person.
    pub refreshable: bool,
}

#[derive(Clone)]
pub struct FileStore {
    path: PathBuf,
    read: Arc<Mutex<Option<(SystemTime, StoredCredentials)>>>,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.path)
            .finish()
    }
}

impl FileStore {
    /// `state/oauth/<upstream>.json` under the runtime's state directory.
    pub fn for_upstream(state_dir: &std::path::Path, upstream: &str) -> Self {
        Self {
            path: state_dir.join("oauth").join(format!("{upstream}.json")),
            read: Arc::default(),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Whether tokens were ever stored here.
    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// What the token file says about its access token at `now` (unix seconds), never the
    /// token itself; `None` when there is no file or no token in it.
    pub fn state(&self, now: u64) -> Option<TokenState> {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&self.path).ok()?).ok()?;
        let token = v.get("token_response").filter(|t| t.is_object())?;
        let expires_at_unix = v["token_received_at"]
            .as_u64()
            .zip(token["expires_in"].as_u64())
            .map(|(at, ttl)| at.saturating_add(ttl));
        Some(TokenState {
            expires_at_unix,
            expired: expires_at_unix.is_some_and(|e| e <= now),
            refreshable: token["refresh_token"]
                .as_str()
                .is_some_and(|r| !r.is_empty()),
        })
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("{what} {}: {e}", self.path.display()))
    }
}

#[async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let modified = match std::fs::metadata(&self.path) {
            Ok(m) => m.modified().ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.failed("cannot read", e)),
        };
        if let Some(m) = modified
            && let Some((at, creds)) = self.read.lock().as_ref()
            && *at == m
        {
            return Ok(Some(creds.clone()));
        }
        let text = match std::fs::read(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.failed("cannot read", e)),
        };
        let creds: StoredCredentials =
            serde_json::from_slice(&text).map_err(|e| self.failed("cannot parse", e))?;
        if let Some(m) = modified {
            *self.read.lock() = Some((m, creds.clone()));
        }
        Ok(Some(creds))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let bytes =
            serde_json::to_vec(&credentials).map_err(|e| self.failed("cannot encode", e))?;
        *self.read.lock() = None;
        mcpb_config::layout::write_private(&self.path, &bytes)
            .map_err(|e| self.failed("cannot write", e))?;
        // The folder of sign-ins is the user's alone too.
        if let Some(dir) = self.path.parent() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        *self.read.lock() = None;
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed("cannot remove", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn credentials_survive_a_round_trip_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::for_upstream(dir.path(), "notes");
        assert!(store.load().await.unwrap().is_none());
        let creds = StoredCredentials::new("client-1".into(), None, vec!["read".into()], Some(7));
        store.save(creds).await.unwrap();
        let back = store.load().await.unwrap().unwrap();
        assert_eq!(back.client_id, "client-1");
        assert_eq!(back.granted_scopes, vec!["read".to_string()]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        assert_eq!(store.state(0), None, "no token in it");
        std::fs::write(
            store.path(),
            r#"{"client_id":"c","token_response":{"access_token":"t","token_type":"bearer","expires_in":60},"token_received_at":1000}"#,
        )
        .unwrap();
        let state = store.state(1059).unwrap();
        assert_eq!(state.expires_at_unix, Some(1060));
        assert!(!state.expired && !state.refreshable);
        assert!(store.state(1060).unwrap().expired);
        store.clear().await.unwrap();
        assert!(!store.exists());
        store.clear().await.unwrap();
    }
}
