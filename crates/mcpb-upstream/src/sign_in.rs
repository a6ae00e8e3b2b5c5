//! The sign-in a remote upstream's requests carry (OAuth, through mcpb-oauth): read from its
//! token file at each start, or fetched with the client-credentials grant.

use std::sync::Arc;

use crate::{Upstream, UpstreamError};

impl Upstream {
    /// The sign-in a remote upstream's requests carry: none when a static `Authorization`
    /// header is configured or nobody signed in; with the client-credentials grant, fetched
    /// now when none is kept.
    pub(crate) async fn bearer(
        &self,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<Arc<mcpb_oauth::Bearer>>, UpstreamError> {
        let lookup = |k: &str| std::env::var(k).ok();
        let Some(dir) = &self.ctx.state_dir else {
            return Ok(None);
        };
        if headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"))
        {
            return Ok(None);
        }
        let name = &self.settings.name;
        let url = self.settings.url.clone().unwrap_or_default();
        let failed = |e: mcpb_oauth::OAuthError| UpstreamError::Connect {
            upstream: name.clone(),
            reason: e.to_string(),
        };
        let store = mcpb_oauth::FileStore::for_upstream(dir, name);
        if let Some(o) = &self.settings.oauth
            && o.grant == mcpb_config::OAuthGrant::ClientCredentials
            && !store.exists()
        {
            let secret = o
                .client_secret
                .as_ref()
                .map(|t| t.resolve(&lookup, &self.ctx.secrets_dir))
                .transpose()
                .map_err(|e| UpstreamError::Secret {
                    upstream: name.clone(),
                    key: "oauth.client_secret".into(),
                    reason: e.to_string(),
                })?
                .unwrap_or_default();
            let id = o.client_id.clone().unwrap_or_default();
            mcpb_oauth::client_credentials(&url, store.clone(), &id, &secret, &o.scopes)
                .await
                .map_err(failed)?;
        }
        Ok(mcpb_oauth::Bearer::open(&url, store)
            .await
            .map_err(failed)?
            .map(Arc::new))
    }
}
