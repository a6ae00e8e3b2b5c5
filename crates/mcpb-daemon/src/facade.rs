//! The broker_* tools of the compact facade, answered from the catalog and the profile's view.
//! Only broker_call_tool reaches an upstream; list_servers and status never start one, search
//! and describe start only an upstream whose tools were never listed.

use std::sync::Arc;

use mcpb_config::ProfileSettings;
use mcpb_facade::FacadeTool;
use mcpb_facade::projection::Projection;
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{ClientLink, Reply};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::broker::Broker;
use crate::view::{Seen, sep};

/// Longest query searched; a longer one is cut, not refused.
const MAX_QUERY_BYTES: usize = 1024;
const DEFAULT_LIMIT: usize = 8;
const MAX_LIMIT: usize = 50;
const DEFAULT_PAGE_CHARS: usize = 20_000;

/// What a facade tool answers: its own result, or an upstream's reply to pass on as it is.
pub enum Answer {
    Result(Value),
    Upstream(Reply),
}

/// A tool-level error: the model reads it and can correct itself.
pub fn tool_error(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

fn tool_result(data: Value) -> Value {
    json!({"content": [{"type": "text", "text": data.to_string()}], "structuredContent": data})
}

fn one_line(description: &str) -> String {
    let first = description
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut end = first.len();
    if let Some(i) = first.find(". ") {
        end = i + 1;
    }
    let mut out = first[..end].to_string();
    mcpb_facade::projection::cut_chars(&mut out, 200);
    out
}

fn args<T: for<'de> Deserialize<'de> + Default>(params: &Value) -> Result<T, String> {
    match params.get("arguments") {
        None | Some(Value::Null) => Ok(T::default()),
        Some(a) => serde_json::from_value(a.clone()).map_err(|e| format!("invalid arguments: {e}")),
    }
}

#[derive(Deserialize, Default)]
struct SearchArgs {
    #[serde(default)]
    query: String,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize, Default)]
struct DescribeArgs {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    names: Vec<String>,
}

#[derive(Deserialize, Default)]
struct CallArgs {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    projection: Option<Projection>,
}

#[derive(Deserialize, Default)]
struct ArtifactArgs {
    #[serde(default)]
    id: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    length: Option<usize>,
}

impl Broker {
    pub async fn facade(
        &self,
        tool: FacadeTool,
        profile: &ProfileSettings,
        params: &Value,
        link: Arc<dyn ClientLink>,
    ) -> Result<Answer, BrokerRpcError> {
        let session = link.session_id();
        let done = |v: Value| Ok(Answer::Result(v));
        match tool {
            FacadeTool::ListServers => done(self.list_servers(profile)),
            FacadeTool::Status => done(self.facade_status(profile)),
            FacadeTool::SearchTools => match args::<SearchArgs>(params) {
                Ok(a) => done(self.search(profile, a, session).await),
                Err(e) => done(tool_error(e)),
            },
            FacadeTool::DescribeTool => match args::<DescribeArgs>(params) {
                Ok(a) => done(self.describe(profile, a, session).await),
                Err(e) => done(tool_error(e)),
            },
            FacadeTool::GetArtifact => match args::<ArtifactArgs>(params) {
                Ok(a) => done(self.get_artifact(profile, a)),
                Err(e) => done(tool_error(e)),
            },
            FacadeTool::CloseSession => {
                let mut released = Vec::new();
                for up in self.profile_upstreams(profile) {
                    if up.release_session(session).await {
                        released.push(up.name().to_string());
                    }
                }
                done(tool_result(json!({"released": released})))
            }
            FacadeTool::CallTool => match args::<CallArgs>(params) {
                Ok(a) => self.facade_call(profile, a, params, link).await,
                Err(e) => done(tool_error(e)),
            },
        }
    }

    fn list_servers(&self, profile: &ProfileSettings) -> Value {
        let servers: Vec<Value> = self
            .profile_upstreams(profile)
            .iter()
            .map(|up| {
                let s = up.settings();
                let tools = self
                    .catalog
                    .cached(up.name())
                    .map(|e| crate::view::visible(profile, up, &e).len());
                json!({
                    "name": s.name,
                    "description": s.description,
                    "tags": s.tags,
                    "tools": tools,
                    "state": up.status().state,
                })
            })
            .collect();
        tool_result(json!({"servers": servers}))
    }

    fn facade_status(&self, profile: &ProfileSettings) -> Value {
        let servers: Vec<Value> = self
            .profile_upstreams(profile)
            .iter()
            .map(|up| {
                let st = up.status();
                let entry = self.catalog.cached(up.name());
                let quarantined = entry
                    .as_ref()
                    .map_or(0, |e| e.verdicts.iter().filter(|v| v.is_some()).count());
                let findings = entry.as_ref().map_or(0, |e| e.findings.len());
                let auth_needed = st.last_error.as_deref().is_some_and(needs_auth);
                json!({
                    "name": st.name,
                    "state": st.state,
                    "tools": entry.as_ref().map(|e| crate::view::visible(profile, up, e).len()),
                    "quarantined": quarantined,
                    "findings": findings,
                    "last_error": st.last_error,
                    "auth_needed": auth_needed,
                })
            })
            .collect();
        let mut out = json!({"servers": servers});
        if let Some(e) = self.catalog.pin_error() {
            out["pin_store_error"] = e.into();
        }
        tool_result(out)
    }

    async fn search(&self, profile: &ProfileSettings, a: SearchArgs, session: u64) -> Value {
        let mut query = a.query;
        if query.len() > MAX_QUERY_BYTES {
            let mut end = MAX_QUERY_BYTES;
            while !query.is_char_boundary(end) {
                end -= 1;
            }
            query.truncate(end);
        }
        let server = a.server.filter(|s| !s.is_empty());
        let known: Vec<String> = self
            .profile_upstreams(profile)
            .iter()
            .map(|u| u.name().to_string())
            .collect();
        if let Some(s) = &server
            && !known.contains(s)
        {
            return tool_error(format!(
                "unknown server '{s}'; known servers: {}",
                known.join(", ")
            ));
        }
        let index = self.search_index(profile, session).await;
        let keep = |i: usize| {
            server
                .as_deref()
                .is_none_or(|s| index.seen[i].upstream.name() == s)
        };
        let picked: Vec<usize> = if query.trim().is_empty() {
            if server.is_none() {
                return tool_error("give a query, or a server to list its tools");
            }
            (0..index.seen.len()).filter(|i| keep(*i)).collect()
        } else {
            let limit = a.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
            index
                .index
                .search(&query, limit, &keep)
                .iter()
                .map(|h| h.doc)
                .collect()
        };
        let results: Vec<Value> = picked
            .into_iter()
            .map(|i| {
                let s = &index.seen[i];
                let def = s.definition();
                let required = def
                    .get("inputSchema")
                    .and_then(|s| s.get("required"))
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                json!({
                    "name": s.exposed,
                    "description": one_line(def.get("description").and_then(Value::as_str).unwrap_or("")),
                    "server": s.upstream.name(),
                    "tags": s.upstream.settings().tags,
                    "mutating": s.mutating,
                    "required": required,
                })
            })
            .collect();
        let describe = FacadeTool::DescribeTool.name(sep(profile));
        let call = FacadeTool::CallTool.name(sep(profile));
        let hint = if results.is_empty() {
            "no match; try other words or broker list_servers".replace(
                "broker list_servers",
                &FacadeTool::ListServers.name(sep(profile)),
            )
        } else {
            format!(
                "{describe} {{\"name\": ...}} shows the input schema; {call} {{\"name\": ..., \"arguments\": {{...}}}} runs it"
            )
        };
        let mut out = json!({"results": results, "hint": hint});
        let unavailable = self.unavailable(profile);
        if !unavailable.is_empty() {
            out["unavailable"] = unavailable
                .iter()
                .map(|(server, error)| json!({"server": server, "error": error}))
                .collect();
        }
        tool_result(out)
    }

    async fn describe(&self, profile: &ProfileSettings, a: DescribeArgs, session: u64) -> Value {
        let mut names = a.names;
        names.extend(a.name);
        if names.is_empty() {
            return tool_error("give name or names");
        }
        names.truncate(20);
        let mut tools = Vec::new();
        let mut unknown = Vec::new();
        for name in &names {
            match self.resolve(profile, name, session, false).await {
                Ok(seen) => {
                    let mut def = seen.exposed_definition();
                    if let Some(obj) = def.as_object_mut() {
                        obj.insert("server".into(), seen.upstream.name().into());
                        obj.insert("mutating".into(), seen.mutating.into());
                    }
                    tools.push(def);
                }
                Err(BrokerRpcError::UnknownTool(_)) => unknown.push(json!({
                    "name": name,
                    "did_you_mean": self.suggest(profile, name, session).await,
                })),
                Err(e) => unknown.push(json!({"name": name, "error": e.to_string()})),
            }
        }
        if tools.is_empty() {
            let mut r = tool_result(json!({"tools": [], "unknown": unknown}));
            r["isError"] = true.into();
            return r;
        }
        let mut out = json!({"tools": tools});
        if !unknown.is_empty() {
            out["unknown"] = unknown.into();
        }
        tool_result(out)
    }

    /// Closest visible names; never a hidden one.
    pub async fn suggest(
        &self,
        profile: &ProfileSettings,
        name: &str,
        session: u64,
    ) -> Vec<String> {
        let seen = self.seen_tools(profile, session, false).await;
        mcpb_facade::suggest::closest(name, seen.iter().map(|s| s.exposed.as_str()), 3)
    }

    async fn unknown_tool(&self, profile: &ProfileSettings, name: &str, session: u64) -> Value {
        let near = self.suggest(profile, name, session).await;
        let search = FacadeTool::SearchTools.name(sep(profile));
        if near.is_empty() {
            tool_error(format!(
                "Unknown tool: {name}\nhint: find tools with {search}"
            ))
        } else {
            tool_error(format!(
                "Unknown tool: {name}\nhint: did you mean {}?",
                near.join(", ")
            ))
        }
    }

    async fn facade_call(
        &self,
        profile: &ProfileSettings,
        a: CallArgs,
        params: &Value,
        link: Arc<dyn ClientLink>,
    ) -> Result<Answer, BrokerRpcError> {
        let session = link.session_id();
        let seen: Seen = match self.resolve(profile, &a.name, session, true).await {
            Ok(s) => s,
            Err(BrokerRpcError::UnknownTool(_)) => {
                return Ok(Answer::Result(
                    self.unknown_tool(profile, &a.name, session).await,
                ));
            }
            Err(e) => return Err(e),
        };
        // The client's own _meta (progress token) travels with the call.
        let meta: Map<String, Value> = params
            .get("_meta")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut forwarded = json!({
            "name": seen.tool_name(),
            "arguments": a.arguments.unwrap_or_else(|| json!({})),
        });
        if !meta.is_empty() {
            forwarded["_meta"] = Value::Object(meta);
        }
        let raw = mcpb_protocol::message::to_raw(&forwarded)
            .map_err(|e| BrokerRpcError::Internal(e.to_string()))?;
        let reply = seen.call(profile, session, &raw, link).await?;
        let Reply::Result(result) = reply else {
            return Ok(Answer::Upstream(reply));
        };
        if crate::broker::needs_input(&result) {
            return Ok(Answer::Upstream(Reply::Result(result)));
        }
        let mut value: Value = serde_json::from_str(result.get())
            .map_err(|e| BrokerRpcError::Internal(format!("upstream result: {e}")))?;
        if let Some(obj) = value.as_object_mut() {
            obj.remove("resultType");
        }
        // An error result (bad arguments, say) reaches the model exactly as the upstream wrote it.
        if value.get("isError") == Some(&Value::Bool(true)) {
            return Ok(Answer::Upstream(Reply::Result(result)));
        }
        if let Some(p) = &a.projection {
            mcpb_facade::result::apply_projection(&mut value, p);
        }
        if let Some(chars) = profile.result_budget_chars {
            let store = self.artifacts();
            let reader = FacadeTool::GetArtifact.name(sep(profile));
            value = mcpb_facade::result::apply_budget(
                value,
                &mcpb_facade::result::Budget {
                    chars: usize::try_from(chars).unwrap_or(usize::MAX),
                    store: &store,
                    profile: &profile.name,
                    reader: &reader,
                },
            );
        }
        Ok(Answer::Result(value))
    }

    fn get_artifact(&self, profile: &ProfileSettings, a: ArtifactArgs) -> Value {
        let length = a.length.unwrap_or_else(|| {
            profile
                .result_budget_chars
                .and_then(|b| usize::try_from(b).ok())
                .unwrap_or(DEFAULT_PAGE_CHARS)
        });
        match self
            .artifacts()
            .get(&profile.name, &a.id, a.offset.unwrap_or(0), length)
        {
            Ok(page) => {
                let mut content = vec![json!({"type": "text", "text": page.text})];
                if let Some(next) = page.next_offset {
                    content.push(json!({"type": "text", "text": format!(
                        "[mcp-broker] {} of {} characters shown; next page at offset {next}",
                        next - page.offset, page.total_chars
                    )}));
                }
                json!({
                    "content": content,
                    "structuredContent": {"id": page.id, "offset": page.offset,
                        "total_chars": page.total_chars, "next_offset": page.next_offset},
                })
            }
            Err(mcpb_facade::ArtifactError::Unknown(id)) => tool_error(format!(
                "unknown artifact '{id}'\nhint: artifact ids come from a broker_call_tool result of this profile and expire"
            )),
            Err(e) => tool_error(e.to_string()),
        }
    }

    pub fn artifacts(&self) -> mcpb_facade::ArtifactStore {
        let config = self.config();
        let s = &config.settings;
        mcpb_facade::ArtifactStore::new(
            s.runtime.artifacts_dir(),
            s.broker.artifact_ttl,
            s.broker.artifact_max_bytes,
        )
    }
}

fn needs_auth(error: &str) -> bool {
    let e = error.to_lowercase();
    [
        "401",
        "403",
        "unauthorized",
        "forbidden",
        "credential",
        "token",
        "secret",
    ]
    .iter()
    .any(|k| e.contains(k))
}

/// A profile's search index, rebuilt when the catalog or the configuration changes.
pub struct ProfileIndex {
    pub key: (u64, usize),
    pub index: mcpb_catalog::Index,
    pub seen: Vec<Seen>,
}

impl Broker {
    pub async fn search_index(&self, profile: &ProfileSettings, session: u64) -> Arc<ProfileIndex> {
        // Every list known first (this may start an upstream never listed), then the
        // generation they make; a search on an unchanged catalog costs one lookup here.
        let never_listed: Vec<_> = self
            .profile_upstreams(profile)
            .into_iter()
            .filter(|up| self.catalog.cached(up.name()).is_none())
            .collect();
        let fetched = futures_util::future::join_all(
            never_listed
                .iter()
                .map(|up| async move { (up.name(), self.fetch_entry(up, session).await) }),
        )
        .await;
        for (name, got) in fetched {
            if let Err(e) = got {
                tracing::warn!(upstream = name, error = %e, "left out of the search");
            }
        }
        let key = (
            self.catalog.generation(),
            Arc::as_ptr(&self.config()) as usize,
        );
        if let Ok(cache) = self.search_cache.lock()
            && let Some(ix) = cache.get(&profile.name)
            && ix.key == key
        {
            return ix.clone();
        }
        let seen = self.seen_tools(profile, session, false).await;
        let docs: Vec<mcpb_catalog::ToolDoc> = seen
            .iter()
            .map(|s| {
                let up = s.upstream.settings();
                let server_text = format!(
                    "{} {} {}",
                    up.name,
                    up.description.as_deref().unwrap_or(""),
                    up.tags.join(" ")
                );
                mcpb_catalog::ToolDoc::from_definition(
                    &s.exposed,
                    &up.name,
                    &server_text,
                    s.definition(),
                )
            })
            .collect();
        let built = Arc::new(ProfileIndex {
            key,
            index: mcpb_catalog::Index::build(&docs, mcpb_catalog::Weights::broker()),
            seen,
        });
        if let Ok(mut cache) = self.search_cache.lock() {
            cache.insert(profile.name.clone(), built.clone());
        }
        built
    }
}
