//! The narrow handles a broker tool gets instead of the whole view, one per job: `Gate`
//! resolves and calls visible tools (pins, policy, the result budget and the audit apply),
//! `Catalog` reads what is known of them (the search index, resources and prompts,
//! suggestions), `Servers` reads the servers' state and lets the session go. None of them
//! hands out an upstream, so nothing a tool holds can call past the gate.

use std::sync::Arc;

use mcpb_config::{ProfileSettings, RuntimeLayout};
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{ClientLink, Reply};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::calls::Via;
use crate::view::{ProfileIndex, ProfileView, Shown, Source, VisibleTool};

/// Visible tools, found and called.
#[derive(Clone, Copy)]
pub(crate) struct Gate<'a>(&'a ProfileView);

/// What is known of the visible tools and content, for search and suggestions.
#[derive(Clone, Copy)]
pub(crate) struct Catalog<'a>(&'a ProfileView);

/// The servers the profile shows: their state, and the session's hold on them.
#[derive(Clone, Copy)]
pub(crate) struct Servers<'a>(&'a ProfileView);

impl ProfileView {
    /// The three handles a broker tool works with.
    pub(crate) fn handles(&self) -> (Gate<'_>, Catalog<'_>, Servers<'_>) {
        (Gate(self), Catalog(self), Servers(self))
    }
}

impl Gate<'_> {
    /// A visible tool by its exposed name (`fresh`: its upstream's list checked first).
    pub(crate) async fn resolve(
        &self,
        exposed: &str,
        fresh: bool,
    ) -> Result<VisibleTool, BrokerRpcError> {
        self.0.resolve(exposed, fresh).await
    }

    /// A visible tool about to be called (its upstream started for it, a refusal audited).
    pub(crate) async fn resolve_for_call(
        &self,
        exposed: &str,
        via: Via,
    ) -> Result<VisibleTool, BrokerRpcError> {
        self.0.resolve_for_call(exposed, via).await
    }

    /// The call, through the profile's budget and the audit.
    pub(crate) async fn call(
        &self,
        tool: &VisibleTool,
        params: &RawValue,
        link: Arc<dyn ClientLink>,
        via: Via,
    ) -> Result<Reply, BrokerRpcError> {
        self.0.call(tool, params, link, via).await
    }
}

impl Catalog<'_> {
    /// The profile's search index over its visible tools.
    pub(crate) async fn search_index(&self) -> Arc<ProfileIndex> {
        self.0.search_index().await
    }

    pub(crate) fn search_weights(&self) -> mcpb_catalog::Weights {
        self.0.search_weights()
    }

    /// The deep model's vectors kept for the next start, when it ran.
    pub(crate) fn keep_deep_vectors(&self) {
        self.0.keep_deep_vectors();
    }

    pub(crate) async fn all_resources(&self, source: Source) -> Vec<(String, Value)> {
        self.0.all_resources(source).await
    }

    pub(crate) async fn all_prompts(&self, source: Source) -> Vec<(String, Value)> {
        self.0.all_prompts(source).await
    }

    /// The visible names closest to `name`.
    pub(crate) async fn suggest(&self, name: &str) -> Vec<String> {
        self.0.suggest(name).await
    }

    /// Servers whose first list is still on its way.
    pub(crate) fn still_starting(&self) -> Vec<String> {
        self.0.still_starting()
    }

    /// Servers whose last start failed, with why.
    pub(crate) fn unavailable(&self) -> Vec<(String, String)> {
        self.0.unavailable()
    }

    pub(crate) fn servers(&self) -> Vec<Shown> {
        self.0.servers()
    }

    pub(crate) fn profile(&self) -> &ProfileSettings {
        self.0.profile()
    }

    /// `f` on the catalog's own thread (a model's pass takes milliseconds).
    pub(crate) async fn on_catalog_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        self.0.on_catalog_thread(f).await
    }
}

impl Servers<'_> {
    pub(crate) fn list(&self) -> Vec<Shown> {
        self.0.servers()
    }

    /// How many of a server's tools the profile shows, when its list is known.
    pub(crate) fn known_count(&self, up: &Shown) -> Option<usize> {
        self.0.known_count(up)
    }

    /// A server's quarantined tools and scan findings.
    pub(crate) fn trust_counts(&self, upstream: &str) -> (usize, usize) {
        self.0.trust_counts(upstream)
    }

    pub(crate) fn pin_error(&self) -> Option<String> {
        self.0.pin_error()
    }

    pub(crate) fn runtime(&self) -> &RuntimeLayout {
        self.0.runtime()
    }

    /// The session let go of by each server: the names of those that had an instance for it.
    pub(crate) async fn release_session(&self) -> Vec<String> {
        self.0.release_session().await
    }
}
