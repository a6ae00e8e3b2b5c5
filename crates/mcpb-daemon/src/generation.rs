//! One generation of configuration: the settings and the upstreams built from them. A reload
//! swaps in a new generation; requests already running keep the one they started with.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcpb_config::Settings;
use mcpb_upstream::Upstream;

pub(crate) struct Generation {
    pub(crate) settings: Settings,
    pub(crate) upstreams: BTreeMap<String, Arc<Upstream>>,
    /// Which generation this is, never reused (an address could be: a freed generation's
    /// memory may hold the next one).
    serial: u64,
}

impl Generation {
    pub(crate) fn new(settings: Settings, upstreams: BTreeMap<String, Arc<Upstream>>) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            settings,
            upstreams,
            serial: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// The artifact store of this generation's runtime and limits.
    pub(crate) fn artifacts(&self) -> mcpb_facade::ArtifactStore {
        let s = &self.settings;
        mcpb_facade::ArtifactStore::new(
            s.runtime.artifacts_dir(),
            s.broker.artifact_ttl,
            s.broker.artifact_max_bytes,
        )
    }

    pub(crate) fn profile_names(&self) -> String {
        self.settings
            .profiles
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }
}
