//! Everything MCP carries besides tools, across a profile's upstreams: resources (lists,
//! templates, reads), prompts (lists, gets) and completion. Lists are merged in the profile's
//! upstream order. Prompts are namespaced like tools. A resource URI stays as the upstream wrote
//! it unless two upstreams list the same one; then each reads `mcpb://<upstream>/<uri>`, which
//! a read or a completion undoes. Only the profile's upstreams answer; anything else is unknown.

use std::collections::HashMap;
use std::sync::Arc;

use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{CallOptions, ClientLink, Outgoing, Reply, Upstream};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::ProfileView;
use crate::error::rpc_error;

/// Pages read from one upstream for one listing.
const MAX_PAGES: usize = 20;
/// Items in one page of a merged listing.
const PAGE: usize = 500;
/// URIs whose owner the broker remembers between a listing and a read.
const MAX_OWNERS: usize = 50_000;
const PREFIX: &str = "mcpb://";

/// Where a listing comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// From each upstream, started if need be (finding the owner of a URI or a prompt).
    Live,
    /// From a running upstream, else its last listing (a client's listing, a search): an
    /// upstream whose lists are known is not started for one.
    Known,
}

/// Which upstream listed which resource URI: a read finds its upstream without listing again.
#[derive(Default)]
pub(crate) struct ResourceOwners(Mutex<HashMap<String, String>>);

impl ResourceOwners {
    fn learn(&self, uri: &str, upstream: &str) {
        let mut map = self.0.lock();
        if map.len() >= MAX_OWNERS && !map.contains_key(uri) {
            map.clear();
        }
        map.insert(uri.to_string(), upstream.to_string());
    }

    fn owner(&self, uri: &str) -> Option<String> {
        self.0.lock().get(uri).cloned()
    }
}

/// A page of `items` from the offset in `cursor`; the cursor of the next page when there is one.
fn page(items: Vec<Value>, cursor: Option<&str>, key: &str) -> Result<Value, BrokerRpcError> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .strip_prefix("o:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| BrokerRpcError::InvalidParams(format!("unknown cursor {c:?}")))?,
    };
    let end = start.saturating_add(PAGE).min(items.len());
    let mut out = Map::new();
    let more = end < items.len();
    out.insert(
        key.into(),
        Value::Array(
            items
                .into_iter()
                .skip(start)
                .take(end.saturating_sub(start))
                .collect(),
        ),
    );
    if more {
        out.insert("nextCursor".into(), Value::String(format!("o:{end}")));
    }
    Ok(Value::Object(out))
}

fn cursor_of(params: Option<&RawValue>) -> Option<String> {
    let v: Value = serde_json::from_str(params?.get()).ok()?;
    v.get("cursor").and_then(Value::as_str).map(str::to_string)
}

/// Whether a URI holds what could make it name another resource than its text shows: dot
/// segments, escaped dots or separators, backslashes.
fn disguised(uri: &str) -> bool {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let lower = path.to_ascii_lowercase();
    path.split('/').any(|seg| seg == "." || seg == "..")
        || path.contains('\\')
        || ["%2e", "%2f", "%5c", "%00"]
            .iter()
            .any(|e| lower.contains(e))
}

/// Whether `uri` fits an RFC 6570 template at the level MCP servers use: literal text, and
/// `{...}` expressions that stand for one non-empty run of characters.
fn fits(template: &str, uri: &str) -> bool {
    let mut rest = uri;
    let mut parts = template.split('{');
    let Some(head) = parts.next() else {
        return false;
    };
    let Some(r) = rest.strip_prefix(head) else {
        return false;
    };
    rest = r;
    for part in parts {
        let Some((_, literal)) = part.split_once('}') else {
            return false;
        };
        if literal.is_empty() {
            // The expression runs to the end (or to the next expression: greedy, one char).
            if rest.is_empty() {
                return false;
            }
            rest = "";
            continue;
        }
        match rest.get(1..).and_then(|r| r.find(literal)) {
            Some(i) => rest = &rest[i + 1 + literal.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

impl ProfileView {
    fn options(up: &Upstream, link: Option<Arc<dyn ClientLink>>) -> CallOptions {
        let s = up.settings();
        CallOptions {
            idle_timeout: s.call_timeout,
            max_time: s.max_call,
            link,
        }
    }

    /// `method` to every upstream of the profile, every page of `key` gathered, then held to
    /// the upstream's resource filter. A complete listing is remembered (memory and disk).
    /// `Known` answers from that memory for an upstream not running for the session (a
    /// search starts nothing); an upstream whose last start failed answers from it too (and is
    /// retried in the background); one that does not offer the method contributes nothing.
    async fn gather(
        &self,
        method: &str,
        key: &str,
        source: Source,
    ) -> Vec<(Arc<Upstream>, Vec<Value>)> {
        let ups = self.upstreams();
        futures_util::future::join_all(ups.into_iter().map(|up| async move {
            let known = self.shared.known.content(up.name(), key);
            let items = if up.failing().is_some() {
                up.retry_in_background();
                known.map(|l| l.to_vec()).unwrap_or_default()
            } else if let (Source::Known, Some(l), false) =
                (source, &known, up.running_for(self.session))
            {
                l.to_vec()
            } else {
                match self.list_pages(&up, method, key).await {
                    Some(items) => {
                        self.shared
                            .known
                            .observe_content(up.name(), key, &items)
                            .await;
                        items
                    }
                    None => known.map(|l| l.to_vec()).unwrap_or_default(),
                }
            };
            let filter = &up.settings().resource_filter;
            let field = if key == "resourceTemplates" {
                "uriTemplate"
            } else {
                "uri"
            };
            let items = if key == "prompts" || filter.is_empty() {
                items
            } else {
                items
                    .into_iter()
                    .filter(|r| {
                        r.get(field)
                            .and_then(Value::as_str)
                            .is_some_and(|u| filter.admits(u))
                    })
                    .collect()
            };
            (up, items)
        }))
        .await
    }

    /// Every page of one upstream's listing; `None` when it could not be had (an upstream that
    /// answers with an error does not offer it: an empty listing).
    async fn list_pages(&self, up: &Arc<Upstream>, method: &str, key: &str) -> Option<Vec<Value>> {
        let opts = Self::options(up, None);
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .as_ref()
                .and_then(|c| RawValue::from_string(json!({ "cursor": c }).to_string()).ok());
            let outgoing = Outgoing::Request {
                method,
                params: params.as_deref(),
            };
            let result = match up.list(self.session, outgoing, &opts).await {
                Ok(Reply::Result(r)) => r,
                Ok(Reply::Error(_)) => return Some(items),
                Err(e) => {
                    tracing::warn!(upstream = up.name(), method, error = %e, "left out of a listing");
                    return None;
                }
            };
            let mut v = serde_json::from_str::<Value>(result.get()).ok()?;
            if let Some(Value::Array(list)) = v.get_mut(key).map(Value::take) {
                items.extend(list);
            }
            cursor = v
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Some(items)
    }

    /// Every resource of the profile as a client sees it (URIs made unambiguous), with the
    /// upstream that serves it.
    pub(crate) async fn all_resources(&self, source: Source) -> Vec<(String, Value)> {
        let lists = self.gather("resources/list", "resources", source).await;
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (_, items) in &lists {
            for r in items {
                if let Some(uri) = r.get("uri").and_then(Value::as_str) {
                    *seen.entry(uri.to_string()).or_default() += 1;
                }
            }
        }
        let mut out = Vec::new();
        for (up, items) in lists {
            for mut r in items {
                let Some(uri) = r.get("uri").and_then(Value::as_str).map(str::to_string) else {
                    continue;
                };
                self.shared.owners.learn(&uri, up.name());
                if seen.get(&uri).copied().unwrap_or(0) > 1 {
                    r["uri"] = Value::String(format!("{PREFIX}{}/{uri}", up.name()));
                }
                out.push((up.name().to_string(), r));
            }
        }
        out
    }

    /// Every prompt of the profile under its exposed name, with its upstream.
    pub(crate) async fn all_prompts(&self, source: Source) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (up, prompts) in self.gather("prompts/list", "prompts", source).await {
            for mut p in prompts {
                let Some(name) = p.get("name").and_then(Value::as_str) else {
                    continue;
                };
                p["name"] =
                    Value::String(super::tool::exposed_name(&self.profile, up.name(), name));
                out.push((up.name().to_string(), p));
            }
        }
        out
    }

    /// `resources/list`, merged; URIs two upstreams share are made unambiguous.
    pub(crate) async fn list_resources(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Value, BrokerRpcError> {
        let out = self
            .all_resources(Source::Known)
            .await
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        page(out, cursor_of(params).as_deref(), "resources")
    }

    /// `resources/templates/list`, merged.
    pub(crate) async fn list_resource_templates(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Value, BrokerRpcError> {
        let lists = self
            .gather(
                "resources/templates/list",
                "resourceTemplates",
                Source::Known,
            )
            .await;
        let out = lists.into_iter().flat_map(|(_, items)| items).collect();
        page(out, cursor_of(params).as_deref(), "resourceTemplates")
    }

    /// The upstream a resource URI belongs to, and the URI as that upstream knows it; a URI
    /// its upstream's resource filter leaves out is unknown.
    async fn resource_owner(&self, uri: &str) -> Result<(Arc<Upstream>, String), BrokerRpcError> {
        let (up, original) = self.find_resource_owner(uri).await?;
        let filter = &up.settings().resource_filter;
        // Globs judge the URI as written: one that could name another place once decoded or
        // resolved (dot segments, escaped separators) is refused where a filter applies.
        if (!filter.is_empty() && disguised(&original)) || !filter.admits(&original) {
            return Err(BrokerRpcError::UnknownResource(
                uri.chars().take(300).collect(),
            ));
        }
        Ok((up, original))
    }

    async fn find_resource_owner(
        &self,
        uri: &str,
    ) -> Result<(Arc<Upstream>, String), BrokerRpcError> {
        let unknown = || BrokerRpcError::UnknownResource(uri.chars().take(300).collect());
        let ups = self.upstreams();
        let named = |name: &str| ups.iter().find(|u| u.name() == name).cloned();
        if let Some(rest) = uri.strip_prefix(PREFIX)
            && let Some((up, original)) = rest.split_once('/')
        {
            return named(up)
                .map(|u| (u, original.to_string()))
                .ok_or_else(unknown);
        }
        if let Some(up) = self.shared.owners.owner(uri).and_then(|n| named(&n)) {
            return Ok((up, uri.to_string()));
        }
        // Not seen in a listing yet: list (a read starts its upstream anyway), then try the
        // templates.
        let _ = self.all_resources(Source::Live).await;
        if let Some(up) = self.shared.owners.owner(uri).and_then(|n| named(&n)) {
            return Ok((up, uri.to_string()));
        }
        for (up, templates) in self
            .gather(
                "resources/templates/list",
                "resourceTemplates",
                Source::Live,
            )
            .await
        {
            let hit = templates.iter().any(|t| {
                t.get("uriTemplate")
                    .and_then(Value::as_str)
                    .is_some_and(|tpl| fits(tpl, uri))
            });
            if hit {
                return Ok((up, uri.to_string()));
            }
        }
        Err(unknown())
    }

    /// Sends `method` with `params` (a JSON object) to `up`.
    async fn forward(
        &self,
        up: &Upstream,
        method: &str,
        params: &Value,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        let raw = RawValue::from_string(params.to_string())
            .map_err(|e| BrokerRpcError::Internal(e.to_string()))?;
        let outgoing = Outgoing::Request {
            method,
            params: Some(&raw),
        };
        up.call(self.session, outgoing, &Self::options(up, Some(link)))
            .await
            .map_err(rpc_error)
    }

    /// `resources/read`, routed to the URI's upstream; the contents carry the URI as the
    /// client asked for it.
    pub(crate) async fn read_resource(
        &self,
        params: Option<&RawValue>,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        let mut p = object(params)?;
        let uri = p
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| BrokerRpcError::InvalidParams("resources/read needs a uri".into()))?
            .to_string();
        let (up, original) = self.resource_owner(&uri).await?;
        p.insert("uri".into(), Value::String(original.clone()));
        let reply = self
            .forward(&up, "resources/read", &Value::Object(p), link)
            .await?;
        if original == uri {
            return Ok(reply);
        }
        let Reply::Result(raw) = reply else {
            return Ok(reply);
        };
        let mut v: Value =
            serde_json::from_str(raw.get()).map_err(|e| BrokerRpcError::Internal(e.to_string()))?;
        if let Some(Value::Array(contents)) = v.get_mut("contents") {
            for c in contents {
                if c.get("uri").and_then(Value::as_str) == Some(original.as_str()) {
                    c["uri"] = Value::String(uri.clone());
                }
            }
        }
        RawValue::from_string(v.to_string())
            .map(Reply::Result)
            .map_err(|e| BrokerRpcError::Internal(e.to_string()))
    }

    /// `prompts/list`, merged, each name namespaced like a tool's.
    pub(crate) async fn list_prompts(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Value, BrokerRpcError> {
        let out = self
            .all_prompts(Source::Known)
            .await
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        page(out, cursor_of(params).as_deref(), "prompts")
    }

    /// The upstream of an exposed prompt name and the prompt's own name there.
    async fn prompt_owner(&self, exposed: &str) -> Result<(Arc<Upstream>, String), BrokerRpcError> {
        let unknown = || BrokerRpcError::UnknownPrompt(exposed.chars().take(300).collect());
        let up = self.owner_of(exposed).ok_or_else(unknown)?;
        let named = |n: &str| super::tool::exposed_name(&self.profile, up.name(), n) == exposed;
        let sep = self.sep();
        let own = if self.profile.namespace {
            exposed
                .strip_prefix(up.name())
                .and_then(|r| r.strip_prefix(sep))
                .ok_or_else(unknown)?
        } else {
            exposed
        };
        if named(own) {
            return Ok((up.clone(), own.to_string()));
        }
        // A shortened name: only the upstream's list knows which prompt it stands for.
        let lists = self.gather("prompts/list", "prompts", Source::Live).await;
        let found = lists
            .into_iter()
            .filter(|(u, _)| u.name() == up.name())
            .flat_map(|(_, ps)| ps)
            .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_string))
            .find(|n| named(n));
        found.map(|n| (up.clone(), n)).ok_or_else(unknown)
    }

    /// `prompts/get`, routed to the prompt's upstream under its own name.
    pub(crate) async fn get_prompt(
        &self,
        params: Option<&RawValue>,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        let mut p = object(params)?;
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| BrokerRpcError::InvalidParams("prompts/get needs a name".into()))?
            .to_string();
        let (up, own) = self.prompt_owner(&name).await?;
        p.insert("name".into(), Value::String(own));
        self.forward(&up, "prompts/get", &Value::Object(p), link)
            .await
    }

    /// `completion/complete`, routed by the prompt or resource its `ref` names.
    pub(crate) async fn complete(
        &self,
        params: Option<&RawValue>,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        let mut p = object(params)?;
        let invalid = || BrokerRpcError::InvalidParams("completion/complete needs a ref".into());
        let reference = p
            .get_mut("ref")
            .and_then(Value::as_object_mut)
            .ok_or_else(invalid)?;
        let kind = reference
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let up = match kind.as_str() {
            "ref/prompt" => {
                let name = reference
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(invalid)?
                    .to_string();
                let (up, own) = self.prompt_owner(&name).await?;
                reference.insert("name".into(), Value::String(own));
                up
            }
            "ref/resource" => {
                let uri = reference
                    .get("uri")
                    .and_then(Value::as_str)
                    .ok_or_else(invalid)?
                    .to_string();
                let (up, own) = self.resource_owner(&uri).await?;
                reference.insert("uri".into(), Value::String(own));
                up
            }
            _ => return Err(invalid()),
        };
        self.forward(&up, "completion/complete", &Value::Object(p), link)
            .await
    }
}

impl ProfileView {
    /// `resources/subscribe` and `resources/unsubscribe`: remembered per session (updates reach
    /// only the sessions that asked, in the form they asked), passed on to the owner when the
    /// first session subscribes and when the last one leaves.
    pub(crate) async fn subscription(
        &self,
        subscribe: bool,
        params: Option<&RawValue>,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        let p = object(params)?;
        let uri = p
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| BrokerRpcError::InvalidParams("a subscription needs a uri".into()))?
            .to_string();
        let (up, original) = self.resource_owner(&uri).await?;
        let method = if subscribe {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        let pass_on = if subscribe {
            self.shared
                .subscriptions
                .add(self.session, up.name(), &original, &uri)
        } else {
            self.shared
                .subscriptions
                .remove(self.session, up.name(), &original)
        };
        if !pass_on {
            return RawValue::from_string("{}".into())
                .map(Reply::Result)
                .map_err(|e| BrokerRpcError::Internal(e.to_string()));
        }
        let reply = self
            .forward(&up, method, &json!({ "uri": original }), link)
            .await;
        if subscribe && !matches!(reply, Ok(Reply::Result(_))) {
            self.shared
                .subscriptions
                .remove(self.session, up.name(), &original);
        }
        reply
    }

    /// `logging/setLevel`: the session hears log messages of this level and above from the
    /// profile's upstreams; each running one that offers logging is told the level.
    pub(crate) async fn set_log_level(
        &self,
        params: Option<&RawValue>,
        link: &crate::link::SessionLink,
    ) -> Result<Value, BrokerRpcError> {
        let p = object(params)?;
        let level = p.get("level").and_then(Value::as_str).unwrap_or("");
        let rank = crate::notices::level_rank(level)
            .ok_or_else(|| BrokerRpcError::InvalidParams(format!("unknown log level {level:?}")))?;
        link.set_log_level(rank);
        let ups: Vec<_> = self
            .upstreams()
            .into_iter()
            .filter(|u| u.running_for(self.session))
            .collect();
        let body = json!({ "level": level });
        futures_util::future::join_all(ups.iter().map(|up| async {
            let raw = RawValue::from_string(body.to_string()).ok();
            let outgoing = Outgoing::Request {
                method: "logging/setLevel",
                params: raw.as_deref(),
            };
            // An upstream without logging answers method-not-found: nothing to do about it.
            let _ = up
                .call(self.session, outgoing, &Self::options(up, None))
                .await;
        }))
        .await;
        Ok(json!({}))
    }
}

fn object(params: Option<&RawValue>) -> Result<Map<String, Value>, BrokerRpcError> {
    let params = params.ok_or_else(|| BrokerRpcError::InvalidParams("missing params".into()))?;
    match serde_json::from_str::<Value>(params.get()) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(BrokerRpcError::InvalidParams(
            "params must be an object".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{fits, page};
    use serde_json::json;

    #[test]
    fn uris_fit_the_templates_servers_write() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(fits(t, "demo://resource/dynamic/text/42"));
        assert!(!fits(t, "demo://resource/dynamic/text/"));
        assert!(!fits(t, "demo://resource/dynamic/blob/42"));
        assert!(fits("file:///{path}", "file:///a/b.txt"));
        assert!(fits("repo://{owner}/{name}/issues", "repo://me/x/issues"));
        assert!(!fits("repo://{owner}/{name}/issues", "repo://me/x/pulls"));
        assert!(fits("plain://exact", "plain://exact"));
        assert!(!fits("plain://exact", "plain://exactly"));
    }

    #[test]
    fn uris_that_could_name_another_place_are_seen() {
        use super::disguised;
        assert!(disguised("file:///public/../secret/key.txt"));
        assert!(disguised("file:///public/%2E%2E/secret"));
        assert!(disguised("file:///public%2fsecret"));
        assert!(disguised("file:///public/./a"));
        assert!(disguised("file:///public\\..\\secret"));
        assert!(!disguised("file:///public/a.txt"));
        assert!(!disguised(
            "demo://resource/static/document/architecture.md"
        ));
        assert!(!disguised("repo://x/issues?q=a..b"));
    }

    #[test]
    fn merged_lists_page_with_their_own_cursor() {
        let items: Vec<_> = (0..1200)
            .map(|i| json!({"uri": format!("x://{i}")}))
            .collect();
        let first = page(items.clone(), None, "resources").unwrap();
        assert_eq!(first["resources"].as_array().unwrap().len(), 500);
        assert_eq!(first["nextCursor"], "o:500");
        let last = page(items.clone(), Some("o:1000"), "resources").unwrap();
        assert_eq!(last["resources"].as_array().unwrap().len(), 200);
        assert!(last.get("nextCursor").is_none());
        assert!(page(items.clone(), Some("bogus"), "resources").is_err());
        let past = page(items, Some("o:18446744073709551615"), "resources").unwrap();
        assert_eq!(past["resources"], json!([]));
    }
}
