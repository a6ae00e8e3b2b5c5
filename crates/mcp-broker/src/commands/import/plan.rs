//! What `client import` does with each server it finds, decided before anything is written:
//! moved to a new upstream, the same as an upstream already there, or left in the client and
//! why. Literal credentials become files under the secrets dir (`${file:NAME}`), so a moved
//! server does not depend on which client's environment started the daemon.

use std::collections::BTreeMap;
use std::path::Path;

use crate::commands::import::secrets::{arg_secret, credential_key, secret_looking, url_secret};
use mcpb_clients::{Place, Server};
use mcpb_config::UpstreamSettings;

use crate::commands::upstream::NewUpstream;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Becomes the new upstream of this name.
    Moved(String),
    /// The same command as this upstream (already in the broker, or moved from another place).
    Same(String),
    /// Stays in the client, for this reason.
    Kept(String),
    /// Stays in the client, which does not start it either (not approved, excluded, switched
    /// off): nothing is lost, and the broker must not start it.
    Off(String),
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
    /// What the import chose for a server that the table does not say (left unsandboxed,
    /// kept apart from the same command), one line each.
    pub notes: Vec<String>,
}

pub(crate) struct Options<'a> {
    pub keep: &'a [String],
    pub rename: &'a BTreeMap<String, String>,
    pub existing: &'a BTreeMap<String, UpstreamSettings>,
    pub secrets_dir: &'a Path,
    /// The folder a project's `${workspaceFolder}` means.
    pub folder: &'a Path,
    /// `--read-only`: the upstreams' read-only annotations are believed.
    pub read_only: bool,
    /// Local servers get the standard sandbox (not `--no-sandbox`).
    pub sandbox: bool,
    /// Project files shared through git that this client has no per-user switch for: their
    /// servers stay, unless `--edit-project-files`.
    pub shared: &'a [std::path::PathBuf],
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
    // `__` separates upstream and tool in some name styles: never inside a name.
    while out.contains("__") {
        out = out.replace("__", "_");
    }
    out = out.trim_matches(|c| c == '-' || c == '_').to_string();
    out.truncate(40);
    let out = out.trim_end_matches(['-', '_']).to_string();
    if out.is_empty() { "server".into() } else { out }
}

/// A value as the client's file writes it: text the broker can hold (literal, or with
/// `${VAR}` references: the variables it needs), or something only the client can fill in
/// (`${input:…}`, which VS Code asks the user for).
#[derive(Debug, PartialEq, Eq)]
enum Value<'a> {
    Text { text: String, vars: Vec<String> },
    Foreign(&'a str),
}

fn is_var(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn value<'a>(raw: &'a str, folder: &Path) -> Value<'a> {
    let mut text = String::new();
    let mut vars = Vec::new();
    let mut rest = raw;
    while let Some(at) = rest.find("${") {
        text.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Value::Foreign(raw);
        };
        let inner = &after[..end];
        let name = inner.strip_prefix("env:").unwrap_or(inner);
        match inner {
            "workspaceFolder" | "workspaceRoot" => text.push_str(&folder.display().to_string()),
            "userHome" => text.push_str(&std::env::var("HOME").unwrap_or_default()),
            _ if is_var(name) => {
                text.push_str(&format!("${{{name}}}"));
                vars.push(name.to_string());
            }
            _ => return Value::Foreign(raw),
        }
        rest = &after[end + 1..];
    }
    text.push_str(rest);
    Value::Text { text, vars }
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
        .take(100)
        .collect()
}

impl Plan {
    /// Writes every secret file (0600) into `dir`; the first that fails is the error, said
    /// with "nothing else was written" (the caller writes the config only after this).
    pub(crate) fn write_secrets(&self, dir: &Path) -> Result<(), std::process::ExitCode> {
        for s in &self.secrets {
            let path = dir.join(&s.name);
            if let Err(e) = mcpb_config::layout::write_private(&path, s.value.as_bytes()) {
                return Err(crate::fail(
                    &format!("mcp-broker: cannot write {}: {e}", path.display()),
                    &["nothing else was written"],
                ));
            }
        }
        Ok(())
    }

    /// The file a secret goes to: a new name, or one that holds this value already.
    fn secret(&mut self, dir: &Path, upstream: &str, key: &str, value: &str) -> String {
        let base = secret_name(upstream, key);
        let names = std::iter::once(base.clone()).chain((2..).map(|n| format!("{base}-{n}")));
        for name in names {
            let planned = self.secrets.iter().find(|s| s.name == name);
            let held = planned
                .map(|s| s.value.clone())
                .or_else(|| std::fs::read_to_string(dir.join(&name)).ok());
            match held {
                Some(v) if v.trim_end_matches('\n') != value => continue,
                _ if planned.is_some() => {}
                _ => self.secrets.push(SecretFile {
                    name: name.clone(),
                    value: value.to_string(),
                    from: format!("{upstream}: {key}"),
                }),
            }
            return name;
        }
        base
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
            Value::Foreign(_) => Err(format!(
                "its {key} holds a value the client fills in itself (such as ${{input:…}})"
            )),
            Value::Text { text, vars } if !vars.is_empty() => {
                for v in vars {
                    self.variables.push((v, upstream.to_string()));
                }
                Ok(format!("{key}={text}"))
            }
            Value::Text { text: v, .. }
                if credential_key(key)
                    || secret_looking(&v)
                    || (v.contains("://") && url_secret(&v)) =>
            {
                // `Bearer xyz`: the scheme stays, the token goes to the file.
                let (scheme, token) = match v.split_once(' ') {
                    Some((s, t)) if !s.is_empty() && !t.contains(' ') => (format!("{s} "), t),
                    _ => (String::new(), v.as_str()),
                };
                let file = self.secret(o.secrets_dir, upstream, key, token);
                Ok(format!("{key}={scheme}${{file:{file}}}"))
            }
            Value::Text { text, .. } => Ok(format!("{key}={text}")),
        }
    }

    /// Server `s` as upstream `name` running in `cwd`, or why the broker cannot hold it; a
    /// refused server leaves no secret or variable behind.
    pub(crate) fn as_upstream(
        &mut self,
        o: &Options<'_>,
        cwd: Option<String>,
        s: &Server,
        name: &str,
    ) -> Result<NewUpstream, String> {
        let secrets_before = self.secrets.len();
        let variables_before = self.variables.len();
        let built = self.build(o, cwd, s, name);
        if built.is_err() {
            self.secrets.truncate(secrets_before);
            self.variables.truncate(variables_before);
        }
        built
    }

    fn build(
        &mut self,
        o: &Options<'_>,
        cwd: Option<String>,
        s: &Server,
        name: &str,
    ) -> Result<NewUpstream, String> {
        if let Some(f) = &s.env_file {
            return Err(format!(
                "it reads its environment from envFile {f}, which the broker does not read; put those values in its env first"
            ));
        }
        let env = self.env(o, s, name)?;
        let headers = self.headers(o, s, name)?;
        let command = match &s.command {
            Some(c) => command(o, cwd.as_deref(), c, &s.args)?,
            None => Vec::new(),
        };
        let url = match (&s.url, &s.command) {
            (Some(u), None) => Some(url(u)?),
            _ => None,
        };
        let new = NewUpstream {
            name: name.to_string(),
            command,
            transport: (s.sse && url.is_some()).then(|| "sse".to_string()),
            url,
            headers,
            env,
            lifecycle: None,
            project: None,
            cwd,
            tools_allow: s.tools_allow.clone(),
            tools_deny: s.tools_deny.clone(),
            tags: Vec::new(),
            trust_annotations: o.read_only,
            sandbox: o.sandbox,
        };
        // Whatever the config would refuse stays in the client, with the config's reason.
        crate::commands::upstream::entry(&new)?;
        Ok(new)
    }

    /// The server's environment as `K=V` entries: literal secrets to files, and the
    /// variables Codex passes through from its own environment.
    fn env(&mut self, o: &Options<'_>, s: &Server, name: &str) -> Result<Vec<String>, String> {
        let mut env = Vec::new();
        for (k, v) in &s.env {
            // `K=V` pairs are split at the first `=`: a key must be a variable's name.
            if !is_var(k) {
                return Err(format!("its env key {k:?} is not a variable name"));
            }
            env.push(self.pair(o, name, k, v)?);
        }
        for var in &s.env_vars {
            if !is_var(var) {
                return Err(format!("its env_vars names {var:?}, not a variable"));
            }
            if !s.env.iter().any(|(k, _)| k == var) {
                env.push(format!("{var}=${{{var}}}"));
                self.variables.push((var.clone(), name.to_string()));
            }
        }
        Ok(env)
    }

    /// The server's HTTP headers as `K=V` entries, those taken from variables included.
    fn headers(&mut self, o: &Options<'_>, s: &Server, name: &str) -> Result<Vec<String>, String> {
        let mut headers = Vec::new();
        for (k, v) in &s.headers {
            headers.push(self.pair(o, name, k, v)?);
        }
        for (h, var, prefix) in &s.env_headers {
            if !is_var(var) {
                return Err(format!("its header {h} names {var:?}, not a variable"));
            }
            headers.push(format!("{h}={prefix}${{{var}}}"));
            self.variables.push((var.clone(), name.to_string()));
        }
        Ok(headers)
    }
}

/// The server's command and arguments as the broker will run them: no variable the client
/// fills in, no secret in an argument, nothing relative to wherever the client starts.
fn command(
    o: &Options<'_>,
    cwd: Option<&str>,
    c: &str,
    args: &[String],
) -> Result<Vec<String>, String> {
    let c = match value(c, o.folder) {
        Value::Text { text, vars } if vars.is_empty() => text,
        Value::Text { .. } | Value::Foreign(_) => {
            return Err("its command refers to a variable the client fills in".into());
        }
    };
    // `./srv.sh` is the folder's, not wherever the daemon runs.
    let c = match cwd {
        Some(dir) if c.contains('/') && !c.starts_with('/') => {
            Path::new(dir).join(&c).display().to_string()
        }
        None if c.contains('/') && !c.starts_with('/') => {
            return Err(format!(
                "its command {} is relative to whichever folder the client starts in; give it an absolute path",
                cut(&c)
            ));
        }
        _ => c,
    };
    let mut command = vec![c];
    let mut after_secret_flag = false;
    for a in args {
        let a = match value(a, o.folder) {
            Value::Text { text, vars } if vars.is_empty() => text,
            Value::Text { .. } | Value::Foreign(_) => {
                return Err(format!(
                    "its argument {:?} refers to a variable the client fills in",
                    cut(a)
                ));
            }
        };
        let flag = a.trim_start_matches('-');
        let (flag_name, inline) = match flag.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (flag, None),
        };
        let secret_flag = a.starts_with('-') && credential_key(flag_name);
        if after_secret_flag
            || (secret_flag && inline.is_some_and(|v| !v.is_empty()))
            || arg_secret(&a)
        {
            return Err(
                "its arguments carry a secret, which the broker's config would hold in plain text; pass it through env first".into(),
            );
        }
        after_secret_flag = secret_flag && inline.is_none();
        if cwd.is_none() && (a == "." || a == ".." || a.starts_with("./") || a.starts_with("../")) {
            return Err(format!(
                "its argument {a} is relative to whichever folder the client starts in; give an absolute path"
            ));
        }
        command.push(a);
    }
    Ok(command)
}

/// A remote server's URL, when the broker's config may hold it as it is.
fn url(u: &str) -> Result<String, String> {
    if !(u.starts_with("http://") || u.starts_with("https://")) {
        return Err("its URL is not http(s)".into());
    }
    if u.contains("${") {
        return Err("its URL refers to a variable the client fills in".into());
    }
    if url_secret(u) {
        return Err(
            "its URL carries a credential, which the broker's config would hold in plain text; use a header".into(),
        );
    }
    Ok(u.to_string())
}

/// A value cut for a message.
fn cut(v: &str) -> String {
    let mut c: String = v.chars().take(40).collect();
    if c.len() < v.len() {
        c.push('…');
    }
    c
}

/// The folder a server runs in: its own `cwd`, else a project's (or a folder's) servers run in
/// that folder, as their client runs them; a user's run wherever the client was started.
fn cwd_of(o: &Options<'_>, place: &Place, s: &Server) -> Option<String> {
    // A remote server runs elsewhere: a folder means nothing to it.
    s.command.as_ref()?;
    let folder = match place.scope {
        mcpb_clients::Scope::User => None,
        mcpb_clients::Scope::Local | mcpb_clients::Scope::Project => Some(
            place
                .folder
                .clone()
                .unwrap_or_else(|| o.folder.display().to_string()),
        ),
    };
    s.cwd.clone().or(folder)
}

/// The folder a project's or a folder's servers belong to (shown to its sessions only); `None`
/// for a user's.
fn project_of(o: &Options<'_>, place: &Place) -> Option<String> {
    (place.scope != mcpb_clients::Scope::User).then(|| {
        place
            .folder
            .clone()
            .unwrap_or_else(|| o.folder.display().to_string())
    })
}

/// Whether two servers start the same thing with the same settings (not their folders).
fn same_start(a: &Server, b: &Server) -> bool {
    (a.command.is_some() || a.url.is_some())
        && a.command == b.command
        && a.args == b.args
        && a.url == b.url
        && a.env == b.env
        && a.headers == b.headers
        && a.cwd == b.cwd
        && a.env_vars == b.env_vars
        && a.env_headers == b.env_headers
        && a.tools_allow == b.tools_allow
        && a.tools_deny == b.tools_deny
}

/// Whether a client's value is what the upstream's template gives: the same text, or the
/// same secret file's content.
fn same_value(t: &mcpb_config::template::Template, raw: &str, o: &Options<'_>) -> bool {
    if let Value::Text { text, .. } = value(raw, o.folder)
        && t.to_string() == text
    {
        return true;
    }
    t.resolve(&|_| None, o.secrets_dir).is_ok_and(|v| v == raw)
}

fn same_pairs(
    mine: &[(String, String)],
    theirs: &BTreeMap<String, mcpb_config::template::Template>,
    o: &Options<'_>,
) -> bool {
    mine.len() == theirs.len()
        && mine
            .iter()
            .all(|(k, v)| theirs.get(k).is_some_and(|t| same_value(t, v, o)))
}

/// Whether an upstream the broker has already is this server: same start, same folder, same
/// env and headers.
pub(crate) fn same_as_upstream(
    s: &Server,
    cwd: Option<&str>,
    u: &UpstreamSettings,
    o: &Options<'_>,
) -> bool {
    if u.cwd.as_deref().map(|c| c.display().to_string()).as_deref() != cwd {
        return false;
    }
    let start = match (&s.command, &s.url) {
        (Some(c), _) => u.command.as_deref() == Some(c.as_str()) && u.args == s.args,
        (None, Some(url)) => u.url.as_deref() == Some(url.as_str()),
        _ => false,
    };
    let (allow, deny) = u.tool_filter.patterns();
    start
        && s.env_vars.is_empty()
        && s.env_headers.is_empty()
        && s.tools_allow == allow
        && s.tools_deny == deny
        && same_pairs(&s.env, &u.env, o)
        && same_pairs(&s.headers, &u.headers, o)
}

/// Decides every server's fate, in the order found.
pub(crate) fn plan(found: Vec<(Place, Server, Option<String>)>, o: &Options<'_>) -> Plan {
    let mut p = Plan::default();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for (place, server, refused) in found {
        let fate = match refused {
            Some(why) => Fate::Off(why),
            None => decide(&mut p, o, &place, &server, &mut taken),
        };
        p.found.push(Found {
            place,
            server,
            fate,
        });
    }
    p
}

/// Names to try for a server: its own, then one naming its scope or folder, then numbered.
fn candidates(base: &str, place: &Place) -> Vec<String> {
    let mut out = vec![base.to_string()];
    let scope = match &place.folder {
        Some(f) => Path::new(f)
            .file_name()
            .map(|n| upstream_name(&n.to_string_lossy()))
            .unwrap_or_else(|| place.scope.name().to_string()),
        None => place.scope.name().to_string(),
    };
    out.push(format!("{base}-{scope}"));
    out.extend((2..100).map(|n| format!("{base}-{n}")));
    out
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
        return Fate::Off("switched off in the client".into());
    }
    if o.shared.contains(&place.path) {
        return Fate::Kept(
            "in a project file shared through git, which the broker does not rewrite for the whole team; --edit-project-files moves it".into(),
        );
    }
    if server.command.is_none() && server.url.is_none() {
        return Fate::Kept("it names no command or URL".into());
    }
    // The same server under another name, or in another scope: one upstream serves both.
    let cwd = cwd_of(o, place, server);
    if let Some(earlier) = p.found.iter().find(|f| {
        same_start(&f.server, server)
            && cwd_of(o, &f.place, &f.server) == cwd
            && project_of(o, &f.place) == project_of(o, place)
    }) {
        match &earlier.fate {
            Fate::Moved(u) | Fate::Same(u) => return Fate::Same(u.clone()),
            Fate::Kept(_) | Fate::Off(_) => {}
        }
    }
    let renamed = o.rename.get(&server.name).cloned();
    // An upstream the broker has already, under whatever name, that starts the same server.
    if renamed.is_none()
        && let Some(name) = o
            .existing
            .iter()
            .find(|(_, u)| {
                same_as_upstream(server, cwd.as_deref(), u, o)
                    && u.project.as_ref().map(|p| p.display().to_string()) == project_of(o, place)
            })
            .map(|(n, _)| n.clone())
    {
        return Fate::Same(name);
    }
    if let Some(apart) = p.upstreams.iter().find(|u| {
        u.command.first() == server.command.as_ref()
            && u.command.get(1..) == Some(server.args.as_slice())
            && u.cwd != cwd
    }) {
        p.notes.push(format!(
            "{}: kept apart from upstream {}: the same command runs in another folder ({}), which it may read or write",
            server.name,
            apart.name,
            cwd.as_deref().unwrap_or("wherever the daemon runs")
        ));
    }
    let base = renamed
        .clone()
        .unwrap_or_else(|| upstream_name(&server.name));
    let tries = if renamed.is_some() {
        vec![base.clone()]
    } else {
        candidates(&base, place)
    };
    let name = match free_name(o, place, server, cwd.as_deref(), tries, taken) {
        Ok(name) => name,
        Err(Some(same)) => return Fate::Same(same),
        Err(None) => {
            return Fate::Kept(format!(
                "the name {base} is taken by an upstream that starts something else; --rename {}=NEW moves it under another name",
                server.name
            ));
        }
    };
    match p.as_upstream(o, cwd, server, &name) {
        Ok(u) => {
            moved(p, o, place, u, &name);
            taken.insert(name.clone(), p.upstreams.len() - 1);
            Fate::Moved(name)
        }
        Err(why) => Fate::Kept(why),
    }
}

/// The first of `tries` no upstream has (`Err(Some(name))`: an upstream of that name starts
/// this very server; `Err(None)`: every name is taken).
fn free_name(
    o: &Options<'_>,
    place: &Place,
    server: &Server,
    cwd: Option<&str>,
    tries: Vec<String>,
    taken: &BTreeMap<String, usize>,
) -> Result<String, Option<String>> {
    for name in tries {
        if let Some(u) = o.existing.get(&name) {
            if same_as_upstream(server, cwd, u, o)
                && u.project.as_ref().map(|p| p.display().to_string()) == project_of(o, place)
            {
                return Err(Some(name));
            }
            continue;
        }
        if !taken.contains_key(&name) {
            return Ok(name);
        }
    }
    Err(None)
}

/// A server that moves, as its upstream `name`: its project, whether its annotations are
/// believed, whether it can run in the sandbox; added to the plan.
fn moved(p: &mut Plan, o: &Options<'_>, place: &Place, mut u: NewUpstream, name: &str) {
    u.project = project_of(o, place);
    // The user's own servers ran with the user's rights already: their read-only
    // annotations label their tools. A repository's are believed only on request.
    u.trust_annotations = o.read_only || place.scope != mcpb_clients::Scope::Project;
    if u.sandbox
        && let Some(why) = crate::commands::upstream::blind_spot(&u)
    {
        u.sandbox = false;
        p.notes.push(format!(
            "{name}: not sandboxed: {why}\n  hint: keep its data in a folder of its own, then add `sandbox: standard` to upstreams.{name}"
        ));
    }
    p.upstreams.push(u);
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
