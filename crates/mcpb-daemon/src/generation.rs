//! One generation of configuration: the settings and the upstreams built from them. A reload
//! swaps in a new generation; requests already running keep the one they started with.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcpb_config::Settings;
use mcpb_upstream::Upstream;

pub(crate) struct Generation {
    pub(crate) settings: Settings,
    pub(crate) upstreams: BTreeMap<String, Arc<Upstream>>,
}

impl Generation {
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
