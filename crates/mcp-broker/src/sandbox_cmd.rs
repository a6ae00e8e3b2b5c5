//! `mcp-broker sandbox check NAME`: starts one stdio server under its sandbox policy, as the
//! daemon would (same grants, same environment), lists its tools, and shows what it said it
//! was denied, so `fs` and `network` can be tuned without guessing. Needs no daemon and
//! changes nothing but the server's own private home.

use std::io::Read;
use std::process::{Command, ExitCode, Stdio};

use mcpb_config::Settings;

use crate::fail;

/// The words with which programs report what the kernel refused them.
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

pub(crate) fn check(settings: &Settings, name: &str) -> ExitCode {
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
    let root = &settings.runtime.root;
    if let Err(e) = settings.runtime.ensure() {
        return fail(
            &format!("mcp-broker: cannot make {}: {e}", root.display()),
            &[],
        );
    }
    let (exe, args, env, cgroup) = match mcpb_upstream::sandboxed::start_line(
        u,
        policy,
        &settings.broker.env_passthrough,
        root,
    ) {
        Ok(s) => s,
        Err(e) => return fail(&format!("mcp-broker: {e}"), &[]),
    };
    let (read, write) = mcpb_upstream::sandboxed::grants(u, policy, &env, root);
    let view = serde_json::json!({"read": read, "write": write,
        "network": policy.network == mcpb_config::sandbox::NetworkMode::Host});
    outln!("{name}: {}", crate::commands::sandbox_line(&view));
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &u.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail(&format!("mcp-broker: cannot start {name}: {e}"), &[]),
    };
    let listed = crate::import_parity::talk(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    if let Some(cg) = cgroup {
        cg.remove();
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let denied: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            DENIED.iter().any(|d| l.contains(d)) || l.starts_with("mcp-broker sandbox: the ")
        })
        .collect();
    for line in &denied {
        outln!("{name}: denied: {}", crate::printable(line));
    }
    match listed {
        Ok(tools) => {
            outln!(
                "{name}: started in the sandbox and listed {} tool(s)",
                tools.len()
            );
            if !denied.is_empty() {
                errln!(
                    "hint: a denial above may be what it needs: grant the path under sandbox.fs.read or .write, or set network: host"
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(
            &format!("mcp-broker: {name} did not list its tools in the sandbox: {e}"),
            &[
                "the lines above are what it said it was denied; grant those paths under sandbox.fs, or set network: host",
                &format!(
                    "`mcp-broker logs {name}` has the rest of what it said, once the daemon ran it"
                ),
            ],
        ),
    }
}
