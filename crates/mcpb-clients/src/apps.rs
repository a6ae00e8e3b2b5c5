//! Codex's hosted apps (its `codex_apps` connectors): the tools it caches for them under
//! `$CODEX_HOME/cache/codex_apps_tools/`, the `[apps]` tables of its config.toml that decide
//! which of them the model sees, and the allowlist the broker renders there.
//!
//! Codex 0.171.0 keeps, per account, `cache/codex_apps_tools/<sha1>.json`: `schema_version`
//! (4) and `tools`, each entry naming its app (`connector_id`, `connector_name`) beside the MCP
//! definition under `tool`. An app's tool is shown unless its app is off (`[apps.<id>]
//! enabled`, else `[apps._default] enabled`, else on); then the tool's own `enabled` (under
//! `[apps.<id>.tools."<name or title>"]`), then the app's `default_tools_enabled`; else it is
//! shown unless it is destructive or open-world (a missing hint counts as yes) and the app
//! (or `_default`) turned those off.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::ClientsError;

/// The cache schema this reads; another is still read when its entries have the same shape.
pub const CACHE_SCHEMA: u64 = 4;

/// One hosted app's tool as Codex cached it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedTool {
    /// The app's id (`connector_id`): what `[apps.<id>]` is keyed by.
    pub app: String,
    /// The app's display name (`connector_name`), when cached.
    pub app_name: Option<String>,
    /// The MCP definition the model is shown.
    pub definition: Value,
}

impl HostedTool {
    pub fn name(&self) -> &str {
        self.definition["name"].as_str().unwrap_or_default()
    }

    fn hint(&self, key: &str) -> bool {
        self.definition["annotations"][key]
            .as_bool()
            .unwrap_or(true)
    }
}

/// The hosted tools of the newest cache file under `codex_home` (empty when there is none).
pub fn cached_tools(codex_home: &Path) -> Vec<HostedTool> {
    let Ok(dir) = std::fs::read_dir(codex_home.join("cache/codex_apps_tools")) else {
        return Vec::new();
    };
    let newest = dir
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok());
    let Some(v) = newest
        .and_then(|e| std::fs::read(e.path()).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return Vec::new();
    };
    v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let definition = t.get("tool")?.clone();
            definition["name"].as_str()?;
            let app = t["connector_id"]
                .as_str()
                .or_else(|| definition["_meta"]["connector_id"].as_str())?;
            Some(HostedTool {
                app: app.to_string(),
                app_name: t["connector_name"].as_str().map(str::to_string),
                definition,
            })
        })
        .collect()
}

/// The apps a cache holds: id, display name, tool count, in the cache's order.
pub fn apps_of(tools: &[HostedTool]) -> Vec<(String, Option<String>, usize)> {
    let mut apps: Vec<(String, Option<String>, usize)> = Vec::new();
    for t in tools {
        match apps.iter_mut().find(|(id, ..)| *id == t.app) {
            Some(a) => a.2 += 1,
            None => apps.push((t.app.clone(), t.app_name.clone(), 1)),
        }
    }
    apps
}

/// One app's rules in config.toml.
#[derive(Debug, Clone, Default, PartialEq)]
struct AppRules {
    enabled: Option<bool>,
    destructive: Option<bool>,
    open_world: Option<bool>,
    default_tools: Option<bool>,
    tools: BTreeMap<String, Option<bool>>,
}

impl AppRules {
    fn from_table(t: &dyn toml_edit::TableLike) -> Self {
        let flag = |k: &str| t.get(k).and_then(toml_edit::Item::as_bool);
        let tools = t
            .get("tools")
            .and_then(toml_edit::Item::as_table_like)
            .map(|tools| {
                tools
                    .iter()
                    .map(|(name, item)| {
                        let on = item
                            .as_table_like()
                            .and_then(|x| x.get("enabled"))
                            .and_then(toml_edit::Item::as_bool);
                        (name.to_string(), on)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            enabled: flag("enabled"),
            destructive: flag("destructive_enabled"),
            open_world: flag("open_world_enabled"),
            default_tools: flag("default_tools_enabled"),
            tools,
        }
    }
}

/// What a Codex config.toml says about hosted apps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppPolicy {
    default: AppRules,
    apps: BTreeMap<String, AppRules>,
}

impl AppPolicy {
    /// The `[apps]` tables of a config.toml's text; none (or text that is not TOML): every
    /// app on, as Codex has it.
    pub fn of(config: &str) -> Self {
        let Ok(doc) = config.parse::<toml_edit::DocumentMut>() else {
            return Self::default();
        };
        let Some(apps) = doc.get("apps").and_then(toml_edit::Item::as_table_like) else {
            return Self::default();
        };
        let mut policy = Self::default();
        for (key, item) in apps.iter() {
            let Some(t) = item.as_table_like() else {
                continue;
            };
            if key == "_default" {
                policy.default = AppRules::from_table(t);
            } else {
                policy.apps.insert(key.to_string(), AppRules::from_table(t));
            }
        }
        policy
    }

    /// Whether Codex shows `tool` to the model under this policy.
    pub fn shows(&self, tool: &HostedTool) -> bool {
        let app = self.apps.get(&tool.app);
        // An app's table switches it on unless it says otherwise (Codex's default for it).
        let on = match app {
            Some(a) => a.enabled.unwrap_or(true),
            None => self.default.enabled.unwrap_or(true),
        };
        if !on {
            return false;
        }
        let own = app.and_then(|a| {
            let by_title = tool.definition["title"].as_str();
            a.tools
                .get(tool.name())
                .or_else(|| by_title.and_then(|t| a.tools.get(t)))
                .copied()
                .flatten()
        });
        if let Some(on) = own.or_else(|| app.and_then(|a| a.default_tools)) {
            return on;
        }
        let destructive = app
            .and_then(|a| a.destructive)
            .or(self.default.destructive)
            .unwrap_or(true);
        let open_world = app
            .and_then(|a| a.open_world)
            .or(self.default.open_world)
            .unwrap_or(true);
        (destructive || !tool.hint("destructiveHint"))
            && (open_world || !tool.hint("openWorldHint"))
    }
}

/// The tools of `tools` a config.toml's text shows the model.
pub fn shown(config: &str, tools: &[HostedTool]) -> Vec<HostedTool> {
    let policy = AppPolicy::of(config);
    tools.iter().filter(|t| policy.shows(t)).cloned().collect()
}

/// One allowed app, with the only tools of it allowed (empty: all of them).
#[derive(Debug, Clone, PartialEq)]
pub struct Allowed {
    pub app: String,
    pub tools: Vec<String>,
}

/// Resolves what a user wrote (`APP` or `APP/TOOL`, APP by id, by display name or by the
/// name Codex shows, case-insensitive) against the cached apps. Unknown names are errors
/// that list what there is.
pub fn resolve(wanted: &[String], tools: &[HostedTool]) -> Result<Vec<Allowed>, String> {
    let apps = apps_of(tools);
    let mut out: Vec<Allowed> = Vec::new();
    let mut whole: Vec<bool> = Vec::new();
    for w in wanted {
        let (app, tool) = match w.split_once('/') {
            Some((a, t)) => (a, Some(t)),
            None => (w.as_str(), None),
        };
        let id = apps
            .iter()
            .find(|(id, name, _)| {
                id.eq_ignore_ascii_case(app)
                    || name.as_deref().is_some_and(|n| {
                        n.eq_ignore_ascii_case(app) || sanitized(n) == sanitized(app)
                    })
            })
            .map(|(id, ..)| id.clone())
            .ok_or_else(|| {
                let names: Vec<String> = apps
                    .iter()
                    .map(|(id, name, _)| name.clone().unwrap_or_else(|| id.clone()))
                    .collect();
                format!(
                    "no hosted app {app:?} in Codex's cache; it has: {}",
                    names.join(", ")
                )
            })?;
        if let Some(t) = tool
            && !tools.iter().any(|x| x.app == id && x.name() == t)
        {
            return Err(format!("app {app:?} has no tool {t:?} in Codex's cache"));
        }
        let i = out.iter().position(|a| a.app == id).unwrap_or_else(|| {
            out.push(Allowed {
                app: id,
                tools: Vec::new(),
            });
            out.len() - 1
        });
        whole.resize(out.len(), false);
        match tool {
            None => whole[i] = true,
            Some(t) if !out[i].tools.iter().any(|x| x == t) => out[i].tools.push(t.to_string()),
            Some(_) => {}
        }
    }
    // A whole app wins over tools of it named too.
    for (a, whole) in out.iter_mut().zip(whole) {
        if whole {
            a.tools.clear();
        }
    }
    Ok(out)
}

/// Codex's own spelling of an app's name in tool names: lowercase, every character but ASCII
/// letters and digits made `_`, trimmed of `_`.
fn sanitized(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    s.trim_matches('_').to_string()
}

/// config.toml with its `[apps]` made an allowlist: every app off by default, each allowed
/// app on (only its named tools, when some are named), an app switched on before and not
/// allowed now switched off. Everything else in the file stays as written.
pub fn render_allowlist(
    path: &Path,
    existing: Option<&str>,
    allowed: &[Allowed],
) -> Result<String, ClientsError> {
    let text = existing.unwrap_or("");
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| crate::edit::broken_toml(path, &e, text))?;
    let apps = doc
        .entry("apps")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| ClientsError::Shape {
            path: path.to_path_buf(),
            what: "`apps` is not a table".into(),
        })?;
    apps.set_implicit(true);
    let default = table_in(apps, "_default", path)?;
    default["enabled"] = toml_edit::value(false);
    let keys: Vec<String> = apps.iter().map(|(k, _)| k.to_string()).collect();
    for key in keys {
        if key != "_default" && !allowed.iter().any(|a| a.app == key) {
            table_in(apps, &key, path)?["enabled"] = toml_edit::value(false);
        }
    }
    for a in allowed {
        let app = table_in(apps, &a.app, path)?;
        app["enabled"] = toml_edit::value(true);
        if a.tools.is_empty() {
            app.remove("default_tools_enabled");
            continue;
        }
        app["default_tools_enabled"] = toml_edit::value(false);
        let tools = table_in(app, "tools", path)?;
        tools.set_implicit(true);
        for t in &a.tools {
            table_in(tools, t, path)?["enabled"] = toml_edit::value(true);
        }
    }
    Ok(doc.to_string())
}

fn table_in<'a>(
    parent: &'a mut toml_edit::Table,
    key: &str,
    path: &Path,
) -> Result<&'a mut toml_edit::Table, ClientsError> {
    parent
        .entry(key)
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| ClientsError::Shape {
            path: path.to_path_buf(),
            what: format!("`{key}` under apps is not a table"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(app: &str, name: &str, destructive: Option<bool>) -> HostedTool {
        let mut annotations = json!({"openWorldHint": false});
        if let Some(d) = destructive {
            annotations["destructiveHint"] = json!(d);
        }
        HostedTool {
            app: app.into(),
            app_name: Some(format!("App {app}")),
            definition: json!({"name": name, "inputSchema": {}, "annotations": annotations}),
        }
    }

    #[test]
    fn the_tools_are_read_from_the_newest_cache_file_with_their_app() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("cache/codex_apps_tools");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(cached_tools(home.path()).is_empty());
        let cache = json!({"discovery_scope": [], "schema_version": CACHE_SCHEMA, "tools": [
            {"server_name": "codex_apps", "tool_name": "a", "tool_namespace": "codex_apps__gh",
             "tool": {"name": "a", "inputSchema": {}}, "connector_id": "c1", "connector_name": "GitHub"},
            {"server_name": "codex_apps", "tool_name": "b", "tool_namespace": "codex_apps__x",
             "tool": {"name": "b", "inputSchema": {}, "_meta": {"connector_id": "c2"}}},
            {"server_name": "codex_apps", "tool_name": "c", "tool_namespace": "codex_apps__y",
             "tool": {"name": "c", "inputSchema": {}}},
        ]});
        std::fs::write(dir.join("0123.json"), cache.to_string()).unwrap();
        let tools = cached_tools(home.path());
        // Codex drops a tool no app claims; so does the count.
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].app_name.as_deref(), Some("GitHub"));
        assert_eq!(tools[1].app, "c2");
        assert_eq!(
            apps_of(&tools),
            [
                ("c1".into(), Some("GitHub".into()), 1),
                ("c2".into(), None, 1)
            ]
        );
    }

    #[test]
    fn codex_decides_app_then_tool_then_default_then_hints() {
        let gh = tool("gh", "comment", Some(false));
        let rm = tool("gh", "delete_repo", Some(true));
        let bare = tool("gh", "bare", None);
        let other = tool("drive", "find", Some(false));
        let all = AppPolicy::of("");
        assert!([&gh, &rm, &bare, &other].iter().all(|t| all.shows(t)));
        let p = AppPolicy::of(
            "[apps._default]\nenabled = false\n[apps.gh]\ndestructive_enabled = false\n[apps.gh.tools.delete_repo]\nenabled = true\n",
        );
        assert!(p.shows(&gh));
        assert!(p.shows(&rm), "the tool's own switch wins over the hint");
        assert!(!p.shows(&bare), "a missing hint counts as destructive");
        assert!(!p.shows(&other), "off by default");
        let p = AppPolicy::of("[apps.gh]\nenabled = false\ndefault_tools_enabled = true\n");
        assert!(!p.shows(&gh) && p.shows(&other));
    }

    #[test]
    fn the_allowlist_keeps_the_file_and_shows_only_what_was_allowed() {
        let cached = vec![
            tool("gh", "comment", Some(false)),
            tool("gh", "close", Some(false)),
            tool("drive", "find", Some(false)),
            tool("mail", "send", Some(false)),
        ];
        let wanted = vec!["app GH/comment".to_string(), "App Drive".to_string()];
        let allowed = resolve(&wanted, &cached).unwrap();
        assert_eq!(allowed.len(), 2);
        let before = "# mine\nmodel = \"o3\"\n\n[apps.mail]\nenabled = true\n";
        let after = render_allowlist(Path::new("config.toml"), Some(before), &allowed).unwrap();
        assert!(after.starts_with("# mine\nmodel = \"o3\"\n"), "{after}");
        let p = AppPolicy::of(&after);
        let shown: Vec<&str> = cached
            .iter()
            .filter(|t| p.shows(t))
            .map(HostedTool::name)
            .collect();
        assert_eq!(shown, ["comment", "find"], "{after}");
        assert_eq!(
            render_allowlist(Path::new("config.toml"), Some(&after), &allowed).unwrap(),
            after,
            "rendering again changes nothing"
        );
        let err = resolve(&["nope".to_string()], &cached).unwrap_err();
        assert!(err.contains("App gh"), "{err}");
        assert!(resolve(&["gh/nope".to_string()], &cached).is_err());
    }
}
