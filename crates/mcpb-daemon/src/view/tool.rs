//! One tool as a profile sees it: where it lives (upstream, known list, index) and the name the
//! profile exposes it under.

use crate::view::Shown;
use std::sync::Arc;

use mcpb_config::{ProfileSettings, UpstreamSettings};
use mcpb_protocol::Tool;
use mcpb_upstream::Upstream;
use serde_json::Value;

use crate::known::Entry;

#[derive(Clone)]
pub(crate) struct VisibleTool {
    /// Its server, as a broker tool may hold it.
    pub(crate) upstream: Shown,
    pub(crate) entry: Arc<Entry>,
    pub(crate) index: usize,
    pub(crate) exposed: String,
    pub(crate) mutating: bool,
}

/// The name `profile` exposes `name` of `upstream` under: prefixed, or as it is in transparent
/// mode. Tools and prompts both go through here.
pub(crate) fn exposed_name(profile: &ProfileSettings, upstream: &str, name: &str) -> String {
    if profile.namespace {
        mcpb_catalog::names::exposed(profile.broker_tool_name_style.separator(), upstream, name)
    } else {
        name.to_string()
    }
}

/// The upstream part of an exposed name, when the profile prefixes names.
pub(crate) fn upstream_part<'a>(profile: &ProfileSettings, exposed: &'a str) -> Option<&'a str> {
    mcpb_catalog::names::upstream_of(profile.broker_tool_name_style.separator(), exposed)
}

/// The upstream's own name for `exposed`, before a full scan for shortened names.
fn own_part<'a>(profile: &ProfileSettings, upstream: &str, exposed: &'a str) -> Option<&'a str> {
    if !profile.namespace {
        return Some(exposed);
    }
    let sep = profile.broker_tool_name_style.separator();
    exposed.strip_prefix(upstream)?.strip_prefix(sep)
}

/// Whether the profile may see tool `i` of `entry`: approved and allowed.
fn sees(profile: &ProfileSettings, up: &UpstreamSettings, entry: &Entry, i: usize) -> bool {
    entry.approved(i) && mcpb_policy::allows(profile, up, &entry.tools()[i])
}

/// A tool's definition under its exposed name, serialised straight from the known list: a
/// listing of thousands of tools copies none of them.
pub(crate) struct Listed<'a>(&'a VisibleTool);

impl serde::Serialize for Listed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // The members' values are written as the text they are held as, never parsed.
        let members = self.0.definition().members();
        if members.is_empty() {
            // Not an object's text (its making rules that out): written the slow way.
            return self.0.exposed_definition().serialize(s);
        }
        let mut map = s.serialize_map(Some(members.len()))?;
        for (k, v) in &members {
            if k == "name" {
                map.serialize_entry(k, &self.0.exposed)?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

impl VisibleTool {
    fn new(upstream: &Arc<Upstream>, entry: &Arc<Entry>, index: usize, exposed: String) -> Self {
        let mutating = !mcpb_policy::is_read_only(upstream.settings(), &entry.tools()[index]);
        Self {
            upstream: Shown::new(upstream.clone()),
            entry: entry.clone(),
            index,
            exposed,
            mutating,
        }
    }

    /// The visible tools of one upstream's list, in list order.
    pub(crate) fn all_of(
        profile: &ProfileSettings,
        upstream: &Arc<Upstream>,
        entry: &Arc<Entry>,
    ) -> Vec<Self> {
        let up = upstream.settings();
        entry
            .tools()
            .iter()
            .enumerate()
            .filter(|(i, _)| sees(profile, up, entry, *i))
            .map(|(i, t)| {
                let exposed = exposed_name(profile, &up.name, t.name());
                Self::new(upstream, entry, i, exposed)
            })
            .collect()
    }

    /// The tool of `entry` exposed as `exposed`, when the profile may see it.
    pub(crate) fn find(
        profile: &ProfileSettings,
        upstream: &Arc<Upstream>,
        entry: &Arc<Entry>,
        exposed: &str,
    ) -> Option<Self> {
        let up_name = upstream.name();
        let tool_part = own_part(profile, up_name, exposed)?;
        // A name at the length limit may be a shortened one: only the full scan finds those.
        let direct = entry
            .index_of(tool_part)
            .filter(|_| exposed.len() < mcpb_catalog::names::MAX_NAME);
        let index = direct.or_else(|| {
            entry
                .tools()
                .iter()
                .position(|t| exposed_name(profile, up_name, t.name()) == exposed)
        })?;
        if !sees(profile, upstream.settings(), entry, index) {
            return None;
        }
        Some(Self::new(upstream, entry, index, exposed.to_string()))
    }

    pub(crate) fn definition(&self) -> &Tool {
        &self.entry.tools()[self.index]
    }

    pub(crate) fn tool_name(&self) -> &str {
        self.definition().name()
    }

    /// Pinned tools are written in dotted form whatever style the client sees.
    pub(crate) fn is_pinned(&self, profile: &ProfileSettings) -> bool {
        profile.pinned_tools.contains(&self.dotted())
    }

    /// `<upstream>.<tool>`: how pins, `always_show` and allowlists name it.
    pub(crate) fn dotted(&self) -> String {
        mcpb_policy::dotted(self.upstream.name(), self.tool_name())
    }

    /// The definition with its exposed name, as a client lists it, written without a copy.
    pub(crate) fn listed(&self) -> Listed<'_> {
        Listed(self)
    }

    /// The definition with its exposed name, as a client lists it.
    pub(crate) fn exposed_definition(&self) -> Value {
        let mut def = self.definition().to_value();
        if let Some(obj) = def.as_object_mut() {
            obj.insert("name".into(), Value::String(self.exposed.clone()));
        }
        def
    }
}
