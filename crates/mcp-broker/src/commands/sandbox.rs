//! `mcp-broker sandbox check NAME`: starts one stdio server under its sandbox policy, as the
//! daemon would (same grants, same environment), lists its tools, and shows what the kernel
//! refused it (the sandbox traces its system calls for a check), so `fs` and `network` can be
//! tuned without guessing. Needs no daemon and changes nothing but the server's own private
//! home.

use std::io::Read;
use std::process::{Command, ExitCode, Stdio};

use mcpb_config::Settings;

use crate::commands::client::import::parity::Called;
use crate::fail;

/// The most of a checked server's stderr that is read.
const STDERR_CAP: u64 = 8 << 20;

/// The words with which programs report what the kernel refused them: what is shown when the
/// machine does not let the sandbox trace the server.
const DENIED: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "eacces",
    "eperm",
    "erofs",
    "network is unreachable",
    "enetunreach",
    "no such file or directory",
];

/// What the server was refused: the kernel's refusals the sandbox traced into `trace` (a
/// missing path only where the host has it: the sandbox hid it), the sandbox's own refusals,
/// and, untraced, the lines where the server said so. Only the file the server never holds is
/// the kernel's account; it counts when it says `traced`.
fn denials(stderr: &str, trace: &str, network_none: bool) -> Vec<String> {
    let traced = trace.lines().any(|l| l == "traced");
    let mut out = Vec::new();
    if !traced
        && !trace
            .lines()
            .any(|l| l.starts_with("not traced: ") || l.starts_with("refused: "))
    {
        out.push("not traced (the sandbox wrote no trace); what it said instead:".to_string());
    }
    for line in trace.lines() {
        if let Some(rest) = line.strip_prefix("denied: ").filter(|_| traced) {
            out.extend(kernel_denial(rest, network_none));
        } else if let Some(why) = line.strip_prefix("not traced: ") {
            out.push(format!("not traced ({why}); what it said instead:"));
        } else if let Some(said) = line.strip_prefix("refused: ") {
            // The sandbox's own words come on its own channel only: a server can print
            // anything on its stderr, the sandbox's voice included.
            out.push(format!("mcp-broker sandbox: {said}"));
        }
    }
    for line in stderr.lines() {
        if !traced {
            let l = line.to_lowercase();
            if DENIED.iter().any(|d| l.contains(d)) {
                out.push(line.to_string());
            }
        }
    }
    out
}

/// `ERRNO call what` in words, or nothing for a path that is missing outside the sandbox too.
fn kernel_denial(rest: &str, network_none: bool) -> Option<String> {
    let mut parts = rest.splitn(3, ' ');
    let (errno, call, what) = (parts.next()?, parts.next()?, parts.next()?);
    let network = matches!(call, "connect" | "bind") && !what.starts_with('/');
    let path = std::path::Path::new(what);
    // The grant that would allow it: a folder to write in (a file's own folder, where a save
    // through a temp file and a rename needs room), or the path to see.
    let folder = || {
        if path.is_dir() {
            path
        } else {
            path.parent().unwrap_or(path)
        }
    };
    // A system folder, or one at the top, is no grant to suggest.
    let grantable = |p: &std::path::Path| {
        p.components().count() > 2
            && ![
                "/usr", "/bin", "/sbin", "/lib", "/etc", "/proc", "/sys", "/dev", "/boot",
            ]
            .iter()
            .any(|s| p.starts_with(s))
    };
    let why = match errno {
        _ if network && network_none => "no network (network: none)".to_string(),
        "EROFS" | "EBUSY" if grantable(folder()) => format!(
            "read-only in the sandbox (sandbox: {{fs: {{write: [{}]}}}} allows it)",
            folder().display()
        ),
        "EROFS" | "EBUSY" => "read-only in the sandbox".to_string(),
        "EACCES" | "EPERM" => "not permitted".to_string(),
        "ENOENT" if path.symlink_metadata().is_ok() && grantable(path) => format!(
            "hidden by the sandbox (sandbox: {{fs: {{read: [{}]}}}} shows it)",
            path.display()
        ),
        "ENOENT" if path.symlink_metadata().is_ok() => "hidden by the sandbox".to_string(),
        // Made in the home, which the sandbox replaces: its folder is there outside.
        "ENOENT" if in_home(path) && path.parent().is_some_and(|p| p.is_dir()) => {
            format!(
                "its folder is hidden by the sandbox (sandbox: {{fs: {{write: [{}]}}}} allows it)",
                folder().display()
            )
        }
        _ => return None,
    };
    Some(format!("{call} {what}: {why}"))
}

/// Whether `p` lies under the user's home (not the home itself), which the sandbox hides.
fn in_home(p: &std::path::Path) -> bool {
    std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .filter(|h| h.is_absolute() && h != std::path::Path::new("/"))
        .is_some_and(|h| p.parent().is_some_and(|d| d.starts_with(&h)))
}

/// A file of its own for the tracer's lines, in the runtime dir's `run/` (out of the
/// server's sight); removed after the check.
fn trace_file(root: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = root.join("run");
    std::fs::create_dir_all(&dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = dir.join(format!("trace-{}-{now}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    Ok(path)
}

/// What `sandbox check` asks the server to do: list, then maybe one call.
type Call<'a> = Option<(&'a str, serde_json::Value)>;

/// `mcp-broker sandbox check NAME [--call TOOL --args JSON]`.
pub(crate) fn check(settings: &Settings, name: &str, call: Option<(&str, &str)>) -> ExitCode {
    let call = match call
        .map(|(tool, args)| serde_json::from_str::<serde_json::Value>(args).map(|a| (tool, a)))
        .transpose()
    {
        Ok(c) => c,
        Err(e) => {
            return fail(
                &format!("mcp-broker: --args is not JSON: {e}"),
                &["e.g. --args '{\"path\": \"/tmp/x\"}'"],
            );
        }
    };
    let Some(u) = settings.upstreams.get(name) else {
        let names: Vec<&str> = settings.upstreams.keys().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: no upstream named {name:?}"),
            &[&format!("upstreams: {}", names.join(", "))],
        );
    };
    let Some(policy) = &u.sandbox else {
        return fail(
            &format!("mcp-broker: upstream {name} does not run in the sandbox"),
            &[
                "give it `sandbox: standard` in broker.yaml (or set broker.upstream_sandbox: standard), then check it again",
            ],
        );
    };
    match traced_run(settings, name, u, policy, &call) {
        Ok(run) => {
            if let Ok((tools, _)) = &run.talked {
                teach(settings, u, tools);
            }
            say(name, &call, run, policy)
        }
        Err(code) => code,
    }
}

/// The list a check saw goes into the catalog under the settings the server ran with, as the
/// daemon's own start would write it: a first session then lists it without starting it.
fn teach(settings: &Settings, u: &mcpb_config::UpstreamSettings, tools: &[serde_json::Value]) {
    let tools: Vec<mcpb_protocol::Tool> = tools
        .iter()
        .filter_map(|t| mcpb_protocol::Tool::from_value(t).ok())
        .collect();
    let mut list =
        mcpb_catalog::CachedList::new(&u.name, std::sync::Arc::new(tools), mcpb_config::unix_now());
    list.config = Some(mcpb_daemon::listing_key(u));
    let store = mcpb_catalog::ListStore::new(settings.runtime.catalog_dir());
    let known = store.load(&u.name).ok().flatten();
    if known.is_some_and(|k| k.hash == list.hash && k.config == list.config) {
        return;
    }
    if let Err(e) = store.save(&list) {
        errln!(
            "mcp-broker: {}'s list was not kept in the catalog: {e}",
            u.name
        );
    }
}

/// What a checked server did: its listing (and call), its stderr, what the tracer saw.
struct Run {
    talked: Result<(Vec<serde_json::Value>, Option<Called>), String>,
    stderr: String,
    traced: String,
}

/// Starts the server as the daemon would, traced, lists its tools (and makes the call).
fn traced_run(
    settings: &Settings,
    name: &str,
    u: &mcpb_config::UpstreamSettings,
    policy: &mcpb_config::sandbox::SandboxPolicy,
    call: &Call<'_>,
) -> Result<Run, ExitCode> {
    let root = &settings.runtime.root;
    settings.runtime.ensure().map_err(|e| {
        fail(
            &format!("mcp-broker: cannot make {}: {e}", root.display()),
            &[],
        )
    })?;
    let (exe, args, env, cgroup) =
        mcpb_upstream::sandboxed::start_line(u, policy, &settings.broker.env_passthrough, root)
            .map_err(|e| fail(&format!("mcp-broker: {e}"), &[]))?;
    let (read, write) = mcpb_upstream::sandboxed::grants(u, policy, &env, root);
    let view = serde_json::json!({"read": read, "write": write,
        "network": policy.network == mcpb_config::sandbox::NetworkMode::Host});
    outln!("{name}: {}", crate::commands::render::sandbox_line(&view));
    let trace = trace_file(root)
        .map_err(|e| fail(&format!("mcp-broker: cannot make the trace file: {e}"), &[]))?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env_clear()
        .envs(&env)
        .envs(mcpb_sandbox::coverage::profile_env())
        .env(mcpb_sandbox::TRACE_FILE_VAR, &trace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &u.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn().map_err(|e| {
        let _ = std::fs::remove_file(&trace);
        fail(&format!("mcp-broker: cannot start {name}: {e}"), &[])
    })?;
    // Read while it runs: a server (or the tracer) that fills the pipe would otherwise stall
    // until the listing times out. What a check shows is bounded.
    let reader = child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = e.take(STDERR_CAP).read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    });
    let talked = crate::commands::client::import::parity::talk_then_call(
        &mut child,
        call.as_ref().map(|(tool, args)| (*tool, args)),
    );
    let _ = child.kill();
    let _ = child.wait();
    if let Some(cg) = cgroup {
        cg.remove();
    }
    let stderr = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    let traced = std::fs::read(&trace).unwrap_or_default();
    let _ = std::fs::remove_file(&trace);
    Ok(Run {
        talked,
        stderr,
        traced: String::from_utf8_lossy(&traced).into_owned(),
    })
}

/// What the check found: each denial, the listing, the call's answer, and what to grant.
fn say(
    name: &str,
    call: &Call<'_>,
    run: Run,
    policy: &mcpb_config::sandbox::SandboxPolicy,
) -> ExitCode {
    let denied = denials(
        &run.stderr,
        &run.traced,
        policy.network == mcpb_config::sandbox::NetworkMode::None,
    );
    // The server's words may hold what it was given: the CLI redacts like the daemon.
    for line in &denied {
        outln!(
            "{name}: denied: {}",
            crate::printable(&mcpb_redact::redact(line))
        );
    }
    let (tools, called) = match run.talked {
        Ok(t) => t,
        Err(e) => {
            return fail(
                &format!(
                    "mcp-broker: {name} did not list its tools in the sandbox: {}",
                    mcpb_redact::redact(&e)
                ),
                &[
                    "the lines above are what it was refused; grant those paths under sandbox.fs, or set network: host",
                    &format!(
                        "`mcp-broker logs {name}` has the rest of what it said, once the daemon ran it"
                    ),
                ],
            );
        }
    };
    outln!(
        "{name}: started in the sandbox and listed {} tool(s)",
        tools.len()
    );
    if let (Some((tool, _)), Some(answer)) = (call, called) {
        let said = match answer {
            Ok(r) if r["isError"] == true => format!(
                "answered with an error: {}",
                r["content"][0]["text"].as_str().unwrap_or("")
            ),
            Ok(_) => "answered".to_string(),
            Err(e) => e,
        };
        outln!(
            "{name}: call {tool}: {}",
            crate::printable(&mcpb_redact::redact(&said))
        );
    }
    if !denied.is_empty() {
        errln!(
            "hint: a denial above may be what it needs: grant the path under sandbox.fs.read or .write, or set network: host"
        );
    }
    ExitCode::SUCCESS
}

/// Each stdio upstream's sandbox as it would start from this shell (its HOME and PATH, the
/// config's literal environment values; references are not resolved here).
/// `only`: these upstreams alone (a dry run's new ones).
pub(crate) fn sandbox_grants(s: &Settings, only: Option<&[String]>) -> Vec<String> {
    let mut out = Vec::new();
    let mut open = Vec::new();
    // A set: an import of thousands of targets asks once per upstream.
    let only: Option<std::collections::HashSet<&str>> =
        only.map(|o| o.iter().map(String::as_str).collect());
    for (name, u) in &s.upstreams {
        if !u.transport.is_local_process()
            || only.as_ref().is_some_and(|o| !o.contains(name.as_str()))
        {
            continue;
        }
        let Some(policy) = &u.sandbox else {
            open.push(name.as_str());
            continue;
        };
        let mut env: std::collections::BTreeMap<String, String> = ["HOME", "PATH"]
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect();
        for (k, t) in &u.env {
            if let [mcpb_config::template::Part::Literal(v)] = t.parts() {
                env.insert(k.clone(), v.clone());
            }
        }
        let (read, write) = mcpb_upstream::sandboxed::grants(u, policy, &env, &s.runtime.root);
        let view = serde_json::json!({"read": read, "write": write,
            "network": policy.network == mcpb_config::sandbox::NetworkMode::Host});
        out.push(format!(
            "sandbox {}: {}",
            crate::out::one_line(name),
            crate::commands::render::sandbox_line(&view)
        ));
    }
    if !open.is_empty() {
        out.push(format!(
            "not sandboxed: {} (sandbox: standard runs one in the sandbox)",
            open.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traced_refusals_are_said_in_words_and_a_path_missing_everywhere_is_not_one() {
        let trace = "traced\n\
            denied: EROFS open /usr/zz\n\
            denied: ENOENT stat /\n\
            denied: ENOENT open /no/such/path/anywhere\n\
            denied: EPERM connect 127.0.0.1:9\n";
        // What the server prints is its own words, whatever it looks like: the sandbox's voice
        // too.
        let stderr = "denied: ENOENT open /etc/passwd\nnot traced: forged\ncat: /x: Permission denied\nmcp-broker sandbox: the network layer could not be applied (forged)\n";
        assert_eq!(
            denials(stderr, trace, true),
            [
                "open /usr/zz: read-only in the sandbox",
                "stat /: hidden by the sandbox",
                "connect 127.0.0.1:9: no network (network: none)",
            ]
        );
        // With the host's network, a refused connection is not the sandbox's doing.
        assert_eq!(
            denials(stderr, trace, false)[2],
            "connect 127.0.0.1:9: not permitted"
        );
    }

    #[test]
    fn the_sandboxs_refusal_is_read_from_its_own_channel_only() {
        let forged = "mcp-broker sandbox: the mount layer could not be applied (x); the server was not started\n";
        let trace =
            "refused: the user layer could not be applied (EPERM); the server was not started\n";
        assert_eq!(
            denials(forged, trace, false),
            [
                "mcp-broker sandbox: the user layer could not be applied (EPERM); the server was not started"
            ]
        );
        assert!(denials(forged, "traced\n", false).is_empty());
    }

    #[test]
    fn untraced_the_servers_own_words_are_shown() {
        let stderr = "cat: /x: Permission denied\nstarting\n";
        assert_eq!(
            denials(
                stderr,
                "not traced: cannot trace the server: EPERM\n",
                false
            ),
            [
                "not traced (cannot trace the server: EPERM); what it said instead:",
                "cat: /x: Permission denied",
            ]
        );
        // A file that never said `traced` (the init could not open it) is no account either.
        assert_eq!(
            denials(stderr, "denied: EROFS open /usr/zz\n", false),
            [
                "not traced (the sandbox wrote no trace); what it said instead:",
                "cat: /x: Permission denied"
            ]
        );
    }
}
