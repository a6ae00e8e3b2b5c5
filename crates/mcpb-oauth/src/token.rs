//! The daemon's side: the access token of an upstream that was signed in, from its file,
//! refreshed by the SDK when it has expired or the server refused it.

use rmcp::transport::auth::AuthorizationManager;
use tokio::sync::Mutex;

use crate::{FileStore, OAuthError};

pub struct Bearer {
    manager: Mutex<AuthorizationManager>,
}

impl Bearer {
    /// The stored sign-in of the server at `url`; `None` when there is none (never signed in,
    /// signed out, or the authorization server changed since).
    pub async fn open(url: &str, store: FileStore) -> Result<Option<Self>, OAuthError> {
        if !store.exists() {
            return Ok(None);
        }
        crate::tls();
        let mut manager = AuthorizationManager::new(url).await?;
        manager.set_credential_store(store);
        if !manager.initialize_from_store().await? {
            return Ok(None);
        }
        Ok(Some(Self {
            manager: Mutex::new(manager),
        }))
    }

    /// The access token to send now (refreshed first when it has expired).
    pub async fn token(&self) -> Result<String, OAuthError> {
        let token = self.manager.lock().await.get_access_token().await?;
        mcpb_redact::register(&token);
        Ok(token)
    }

    /// The server refused the token: refresh it, when there is a refresh token.
    pub async fn refresh(&self) -> Result<String, OAuthError> {
        let manager = self.manager.lock().await;
        manager.refresh_token().await?;
        let token = manager.get_access_token().await?;
        mcpb_redact::register(&token);
        Ok(token)
    }
}
