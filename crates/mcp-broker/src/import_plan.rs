//! What `client import` does with each server it finds, decided before anything is written:
//! moved to a new upstream, the same as an upstream already there, or left in the client and
//! why. Literal credentials become files under the secrets dir (`${file:NAME}`), so a moved
//! server does not depend on which client's environment started the daemon.

use std::collections::BTreeMap;
use std::path::Path;

use mcpb_clients::{Place, Server};
use mcpb_config::UpstreamSettings;
use mcpb_config::template::looks_like_credential;

use crate::upstreams_cmd::NewUpstream;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Becomes the new upstream of this name.
    Moved(String),
    /// The same command as this upstream (already in the broker, or moved from another place).
    Same(String),
    /// Stays in the client, for this reason.
    Kept(String),
}

#[derive(Debug)]
pub(crate) struct Found {
    pub place: Place,
    pub server: Server,
    pub fate: Fate,
}

/// A secret to be written to `secrets/<name>` (0600) before the config refers to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretFile {
    pub name: String,
    pub value: String,
    /// `upstream: KEY`, to say where it came from.
    pub from: String,
}

#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub found: Vec<Found>,
    pub upstreams: Vec<NewUpstream>,
    pub secrets: Vec<SecretFile>,
    /// Variables the client's file refers to, which the daemon's environment must have:
    /// (variable, upstream).
    pub variables: Vec<(String, String)>,
}

pub(crate) struct Options<'a> {
    pub keep: &'a [String],
    pub rename: &'a BTreeMap<String, String>,
    pub existing: &'a BTreeMap<String, UpstreamSettings>,
    pub secrets_dir: &'a Path,
    /// The folder a project's `${workspaceFolder}` means.
    pub folder: &'a Path,
}

/// An upstream name for a client's server name: lowercase, only what upstream names take.
pub(crate) fn upstream_name(server: &str) -> String {
    let mut out: String = server
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    out = out.trim_matches(|c| c == '-' || c == '_').to_string();
    if out.is_empty() { "server".into() } else { out }
}

/// Whether a value reads like a credential: long, no spaces, letters and digits mixed, and
/// not a path or an address.
pub(crate) fn secret_looking(value: &str) -> bool {
    value.len() >= 16
        && !value.contains(' ')
        && !value.contains('/')
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
}

/// A value as the client's file writes it: literal text, a reference to one environment
/// variable (`${VAR}`, `$VAR`, VS Code's and Cursor's `${env:VAR}`), or something the broker
/// cannot stand in for (`${input:…}`, which the client asks the user for).
#[derive(Debug, PartialEq, Eq)]
enum Value<'a> {
    Literal(String),
    Variable(&'a str),
    Foreign(&'a str),
}

fn is_var(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn value<'a>(raw: &'a str, folder: &Path) -> Value<'a> {
    let whole = raw
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .map(|inner| inner.strip_prefix("env:").unwrap_or(inner))
        .or_else(|| raw.strip_prefix('$'));
    if let Some(name) = whole
        && is_var(name)
    {
        return Value::Variable(name);
    }
    let folder = folder.display().to_string();
    let text = raw
        .replace("${workspaceFolder}", &folder)
        .replace("${workspaceRoot}", &folder);
    if text.contains("${") {
        Value::Foreign(raw)
    } else {
        Value::Literal(text)
    }
}

/// A name for a secret file: `<upstream>-<key>`, in the characters file references take.
fn secret_name(upstream: &str, key: &str) -> String {
    let key = key.to_ascii_lowercase();
    let up = upstream.to_ascii_lowercase().replace('-', "_");
    // `notes` + `NOTES_API_KEY`: `notes_api_key`, not `notes-notes_api_key`.
    let name = if key.starts_with(&format!("{up}_")) {
        key
    } else {
        format!("{upstream}-{key}")
    };
    name.to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Plan {
    /// The file a secret goes to: a new name, or one that holds this value already.
    fn secret(&mut self, dir: &Path, upstream: &str, key: &str, value: &str) -> String {
        let base = secret_name(upstream, key);
        let mut n = 1;
        loop {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let planned = self.secrets.iter().find(|s| s.name == name);
            let on_disk = std::fs::read_to_string(dir.join(&name)).ok();
            let same = planned.map(|s| s.value.as_str()).or(on_disk.as_deref());
            match same {
                Some(v) if v.trim_end_matches('\n') == value => {
                    if planned.is_none() {
                        self.secrets.push(SecretFile {
                            name: name.clone(),
                            value: value.to_string(),
                            from: format!("{upstream}: {key}"),
                        });
                    }
                    return name;
                }
                Some(_) => n += 1,
                None => {
                    self.secrets.push(SecretFile {
                        name: name.clone(),
                        value: value.to_string(),
                        from: format!("{upstream}: {key}"),
                    });
                    return name;
                }
            }
        }
    }

    /// One `K=V` of an upstream's env or headers, with a secret moved to a file.
    fn pair(
        &mut self,
        o: &Options<'_>,
        upstream: &str,
        key: &str,
        raw: &str,
    ) -> Result<String, String> {
        match value(raw, o.folder) {
            Value::Foreign(what) => {
                Err(format!("{key} is {what}, which the client fills in itself"))
            }
            Value::Variable(var) => {
                self.variables.push((var.to_string(), upstream.to_string()));
                Ok(format!("{key}=${{{var}}}"))
            }
            Value::Literal(v) if looks_like_credential(key) || secret_looking(&v) => {
                // `Bearer xyz`: the scheme stays, the token goes to the file.
                let (scheme, token) = match v.split_once(' ') {
                    Some((s, t)) if !s.is_empty() && !t.contains(' ') => (format!("{s} "), t),
                    _ => (String::new(), v.as_str()),
                };
                let file = self.secret(o.secrets_dir, upstream, key, token);
                Ok(format!("{key}={scheme}${{file:{file}}}"))
            }
            Value::Literal(v) => Ok(format!("{key}={v}")),
        }
    }

    fn as_upstream(
        &mut self,
        o: &Options<'_>,
        s: &Server,
        name: &str,
    ) -> Result<NewUpstream, String> {
        let secrets_before = self.secrets.len();
        let variables_before = self.variables.len();
        let undo = |p: &mut Plan| {
            p.secrets.truncate(secrets_before);
            p.variables.truncate(variables_before);
        };
        let mut env = Vec::new();
        for (k, v) in &s.env {
            match self.pair(o, name, k, v) {
                Ok(p) => env.push(p),
                Err(e) => {
                    undo(self);
                    return Err(e);
                }
            }
        }
        let mut headers = Vec::new();
        for (k, v) in &s.headers {
            match self.pair(o, name, k, v) {
                Ok(p) => headers.push(p),
                Err(e) => {
                    undo(self);
                    return Err(e);
                }
            }
        }
        let mut command = Vec::new();
        if let Some(c) = &s.command {
            command.push(c.clone());
            for a in &s.args {
                match value(a, o.folder) {
                    Value::Literal(a) => command.push(a),
                    _ => {
                        undo(self);
                        return Err(format!(
                            "its argument {a:?} refers to a variable the client fills in"
                        ));
                    }
                }
            }
        }
        Ok(NewUpstream {
            name: name.to_string(),
            command,
            url: s.url.clone().filter(|_| s.command.is_none()),
            transport: (s.sse && s.command.is_none()).then(|| "sse".to_string()),
            headers,
            env,
            lifecycle: None,
            cwd: s.cwd.clone(),
        })
    }
}

/// Whether two servers start the same thing (command and arguments, or URL).
fn same_start(a: &Server, b: &Server) -> bool {
    (a.command.is_some() || a.url.is_some())
        && a.command == b.command
        && a.args == b.args
        && a.url == b.url
        && a.env == b.env
}

fn same_as_upstream(s: &Server, u: &UpstreamSettings) -> bool {
    match (&s.command, &s.url) {
        (Some(c), _) => u.command.as_deref() == Some(c.as_str()) && u.args == s.args,
        (None, Some(url)) => u.url.as_deref() == Some(url.as_str()),
        _ => false,
    }
}

/// Decides every server's fate, in the order found.
pub(crate) fn plan(found: Vec<(Place, Server)>, o: &Options<'_>) -> Plan {
    let mut p = Plan::default();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for (place, server) in found {
        let fate = decide(&mut p, o, &place, &server, &mut taken);
        p.found.push(Found {
            place,
            server,
            fate,
        });
    }
    p
}

fn decide(
    p: &mut Plan,
    o: &Options<'_>,
    place: &Place,
    server: &Server,
    taken: &mut BTreeMap<String, usize>,
) -> Fate {
    if o.keep.iter().any(|k| k == &server.name) {
        return Fate::Kept("--keep".into());
    }
    if server.disabled {
        return Fate::Kept("switched off in the client".into());
    }
    if server.command.is_none() && server.url.is_none() {
        return Fate::Kept("it names no command or URL".into());
    }
    // The same server under another name, or in another scope: one upstream serves both.
    if let Some(earlier) = p.found.iter().find(|f| same_start(&f.server, server)) {
        match &earlier.fate {
            Fate::Moved(u) | Fate::Same(u) => return Fate::Same(u.clone()),
            Fate::Kept(_) => {}
        }
    }
    let name = o
        .rename
        .get(&server.name)
        .cloned()
        .unwrap_or_else(|| upstream_name(&server.name));
    if let Some(u) = o.existing.get(&name) {
        if same_as_upstream(server, u) {
            return Fate::Same(name);
        }
        return Fate::Kept(format!(
            "the broker has an upstream named {name} that starts something else; --rename {}=NEW moves it under another name",
            server.name
        ));
    }
    let name = if taken.contains_key(&name) {
        // Another scope's server of this name starts something else.
        let alt = format!("{name}-{}", place.scope.name());
        if taken.contains_key(&alt) || o.existing.contains_key(&alt) {
            return Fate::Kept(format!(
                "another server of the client is named {}; --rename {}=NEW moves it under another name",
                server.name, server.name
            ));
        }
        alt
    } else {
        name
    };
    match p.as_upstream(o, server, &name) {
        Ok(u) => {
            taken.insert(name.clone(), p.upstreams.len());
            p.upstreams.push(u);
            Fate::Moved(name)
        }
        Err(why) => Fate::Kept(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpb_clients::{Client, Scope};

    fn server(name: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        Server {
            name: name.into(),
            command: Some("npx".into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            url: None,
            sse: false,
            headers: vec![],
            cwd: None,
            disabled: false,
        }
    }

    fn place(scope: Scope) -> Place {
        Place {
            client: Client::ClaudeCode,
            scope,
            path: "/h/.claude.json".into(),
            folder: None,
        }
    }

    #[test]
    fn names_and_values_are_made_safe_for_the_config() {
        assert_eq!(upstream_name("GitHub Server"), "github-server");
        assert_eq!(upstream_name("@scope/pkg"), "scope-pkg");
        assert!(secret_looking("ghp_abcdefghijkl1234567890"));
        assert!(!secret_looking("debug"));
        assert!(!secret_looking("/home/u/projects/repo2026"));
        let f = Path::new("/w/app");
        assert_eq!(value("${GH}", f), Value::Variable("GH"));
        assert_eq!(value("${env:GH}", f), Value::Variable("GH"));
        assert_eq!(value("$GH", f), Value::Variable("GH"));
        assert_eq!(
            value("${workspaceFolder}/db", f),
            Value::Literal("/w/app/db".into())
        );
        assert_eq!(value("${input:token}", f), Value::Foreign("${input:token}"));
    }

    #[test]
    fn literal_secrets_go_to_files_duplicates_share_one_upstream_and_clashes_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut existing = BTreeMap::new();
        let s: mcpb_config::Settings = mcpb_config::load_str(
            "schema_version: 1\nupstreams:\n  git: {command: uvx, args: [other]}\n",
            "t",
            mcpb_config::ConfigSource::Embedded,
            &mcpb_config::ResolveContext::from_env(),
        )
        .unwrap();
        existing.extend(s.upstreams);
        let rename = BTreeMap::from([("dup".to_string(), "git2".to_string())]);
        let o = Options {
            keep: &["kept".to_string()],
            rename: &rename,
            existing: &existing,
            secrets_dir: dir.path(),
            folder: Path::new("/w"),
        };
        let found = vec![
            (
                place(Scope::User),
                server(
                    "mem",
                    &["-y", "server-memory"],
                    &[("API_KEY", "sk-live-0123456789abcdef"), ("LOG", "info")],
                ),
            ),
            (
                place(Scope::Local),
                server(
                    "memory",
                    &["-y", "server-memory"],
                    &[("API_KEY", "sk-live-0123456789abcdef"), ("LOG", "info")],
                ),
            ),
            (place(Scope::Local), server("git", &["x"], &[])),
            (place(Scope::Local), server("dup", &["y"], &[])),
            (place(Scope::Project), server("kept", &["k"], &[])),
            (
                place(Scope::Project),
                server("mem", &["-y", "other"], &[("TOKEN", "${GH_TOKEN}")]),
            ),
        ];
        let p = plan(found, &o);
        let fates: Vec<&Fate> = p.found.iter().map(|f| &f.fate).collect();
        assert_eq!(fates[0], &Fate::Moved("mem".into()));
        assert_eq!(fates[1], &Fate::Same("mem".into()));
        assert!(matches!(fates[2], Fate::Kept(w) if w.contains("--rename git=NEW")));
        assert_eq!(fates[3], &Fate::Moved("git2".into()), "--rename dup=git2");
        assert_eq!(fates[4], &Fate::Kept("--keep".into()));
        assert_eq!(fates[5], &Fate::Moved("mem-project".into()));
        assert_eq!(
            p.upstreams[0].env,
            ["API_KEY=${file:mem-api_key}", "LOG=info"]
        );
        assert_eq!(p.secrets.len(), 1);
        assert_eq!(p.secrets[0].value, "sk-live-0123456789abcdef");
        assert_eq!(p.upstreams[2].env, ["TOKEN=${GH_TOKEN}"]);
        assert_eq!(p.variables, [("GH_TOKEN".into(), "mem-project".into())]);
        let all = format!("{:?}", p.upstreams);
        assert!(!all.contains("sk-live"), "{all}");
    }
}
