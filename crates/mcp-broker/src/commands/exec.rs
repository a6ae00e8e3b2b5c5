//! `mcp-broker exec run|open|upload|close`: code runs for people and scripts, through an
//! ordinary session and the same broker tools (run_code, exec_*) a model calls.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, bail};
use mcpb_config::{ExecLimits, Language, Settings};
use mcpb_daemon::tools::run_code::RunOptions;
use mcpb_daemon::tools::{BrokerTool, exec_close, exec_open, exec_run, exec_upload, run_code};
use mcpb_exec::{Persisted, Workspaces};
use serde_json::Value;

use crate::cli::{ExecArgs, ExecCommand};
use crate::commands::tools::call_facade;

fn language(flag: Option<&str>, file: &str) -> anyhow::Result<Language> {
    match flag {
        Some("python") | Some("py") => Ok(Language::Python),
        Some("javascript") | Some("js") => Ok(Language::Javascript),
        Some(other) => bail!("unknown language '{other}'\nhint: python or javascript"),
        None if file.ends_with(".js") || file.ends_with(".mjs") => Ok(Language::Javascript),
        None => Ok(Language::Python),
    }
}

fn read_file(file: &str) -> anyhow::Result<String> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        return Ok(s);
    }
    std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))
}

fn to_value<T: serde::Serialize>(args: T) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(args)?)
}

/// The tool and its arguments for one command.
fn call(command: ExecCommand) -> anyhow::Result<(&'static str, Value)> {
    Ok(match command {
        ExecCommand::Run {
            file,
            language: lang,
            allow,
            read_only,
            exec_id,
            entry,
            limits,
        } => {
            let limits: Option<ExecLimits> = limits
                .map(|l| serde_json::from_str(&l))
                .transpose()
                .context("--limits is not a limits object")?;
            let run = RunOptions {
                language: Some(language(lang.as_deref(), &file)?),
                allow,
                read_only,
                limits,
            };
            match exec_id {
                Some(exec_id) => {
                    let (code, entry) = if entry {
                        (None, Some(file))
                    } else {
                        (Some(read_file(&file)?), None)
                    };
                    let args = exec_run::Args {
                        exec_id,
                        code,
                        entry,
                        run,
                    };
                    (exec_run::ExecRun::VERB, to_value(args)?)
                }
                None => {
                    let code = read_file(&file)?;
                    let args = run_code::Args { code, run };
                    (run_code::RunCode::VERB, to_value(args)?)
                }
            }
        }
        ExecCommand::Open { persist } => (
            exec_open::ExecOpen::VERB,
            to_value(exec_open::Args {
                persist: persist.then_some(true),
            })?,
        ),
        ExecCommand::Upload {
            exec_id,
            file,
            dest,
        } => {
            let path = match dest {
                Some(d) => d,
                None => std::path::Path::new(&file)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .context("the file has no name; give --as")?,
            };
            let content = read_file(&file)?;
            (
                exec_upload::ExecUpload::VERB,
                to_value(exec_upload::Args {
                    exec_id,
                    path,
                    content,
                })?,
            )
        }
        ExecCommand::Close { exec_id, discard } => (
            exec_close::ExecClose::VERB,
            to_value(exec_close::Args { exec_id, discard })?,
        ),
        ExecCommand::List | ExecCommand::Prune { .. } => {
            bail!("exec list and prune work on the files, not through a session")
        }
    })
}

/// The workspaces on disk, as the daemon keeps them (the rules come from the config).
fn workspaces(settings: &Settings) -> Workspaces {
    let exec = &settings.broker.exec;
    Workspaces::new(settings.exec_root(), exec.max_workspaces).with_persisted(Persisted {
        max: exec.max_persisted,
        ttl: std::time::Duration::from_millis(exec.persist_ttl_ms),
        disk_bytes: exec.persisted_disk_bytes,
    })
}

/// `exec list`: one line a workspace, or JSON.
fn list(settings: &Settings, profile: Option<&str>, json: bool) -> ExitCode {
    let all = workspaces(settings).list(profile);
    if json {
        outln!("{}", serde_json::to_string(&all).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if all.is_empty() {
        errln!("no workspaces");
        return ExitCode::SUCCESS;
    }
    let ttl = settings.broker.exec.persist_ttl_ms / 1000;
    outln!("PROFILE\tEXEC ID\tKIND\tKIB\tIDLE\tEXPIRES IN");
    for w in all {
        let kind = match (w.persisted, w.running) {
            (_, true) => "running",
            (true, false) => "persisted",
            (false, false) => "open",
        };
        let expires = if w.persisted {
            humantime::format_duration(std::time::Duration::from_secs(
                ttl.saturating_sub(w.idle_secs),
            ))
            .to_string()
        } else {
            "-".into()
        };
        outln!(
            "{}\t{}\t{kind}\t{}\t{}\t{expires}",
            w.profile,
            w.exec_id,
            w.bytes.div_ceil(1024),
            humantime::format_duration(std::time::Duration::from_secs(w.idle_secs)),
        );
    }
    ExitCode::SUCCESS
}

/// `exec prune`: what went, on stderr; the count on stdout.
fn prune(settings: &Settings, profile: Option<&str>, all: bool) -> ExitCode {
    let n = workspaces(settings).prune(profile, all);
    outln!("{n}");
    errln!("removed {n} workspace{}", if n == 1 { "" } else { "s" });
    ExitCode::SUCCESS
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The profile a run gets without --profile: the default config's facade profile with `exec:`.
const DEFAULT_PROFILE: &str = "compact";

/// A run's program called a tool its profile does not show: which profiles could run it.
fn unknown_tool_hint(settings: &Settings, profile: &str) {
    let hides = settings
        .profiles
        .get(profile)
        .is_some_and(|p| !p.allow_mutating_upstreams);
    if hides {
        errln!(
            "hint: profile {profile} hides tools that may change something (allow_mutating_upstreams: false; mutating_allowlist names exceptions)"
        );
    }
    let others: Vec<&str> = settings
        .profiles
        .iter()
        .filter(|(n, p)| n.as_str() != profile && p.exec.is_some())
        .map(|(n, _)| n.as_str())
        .collect();
    if others.is_empty() {
        errln!(
            "hint: `mcp-broker tools search QUERY --profile {profile}` lists what it shows; a client's profile runs code once it has an `exec:` block"
        );
    } else {
        errln!(
            "hint: `--profile P` runs it in another profile with `exec:`: {}",
            others.join(", ")
        );
    }
}

pub(crate) fn run(settings: &Settings, a: ExecArgs) -> ExitCode {
    let (profile, json, command) = (a.profile.as_deref(), a.json, a.command);
    match command {
        ExecCommand::List => return list(settings, profile, json),
        ExecCommand::Prune { all } => return prune(settings, profile, all),
        ExecCommand::Run { .. }
        | ExecCommand::Open { .. }
        | ExecCommand::Upload { .. }
        | ExecCommand::Close { .. } => {}
    }
    let is_run = matches!(command, ExecCommand::Run { .. });
    let is_open = matches!(command, ExecCommand::Open { .. });
    let result = call(command).and_then(|(tool, args)| {
        call_facade(
            settings,
            Some(profile.unwrap_or(DEFAULT_PROFILE)),
            tool,
            args,
        )
    });
    let result = match result {
        Ok(r) => r,
        Err(e) => return crate::fail(&format!("{e:#}"), &[]),
    };
    let data = &result["structuredContent"];
    if result["isError"] == Value::Bool(true) && data.is_null() {
        return crate::fail(&text_of(&result), &[]);
    }
    // `ID=$(mcp-broker exec open)`: the id alone, as the help says; --json for the answer.
    if is_open
        && !json
        && let Some(id) = data["exec_id"].as_str()
    {
        outln!("{id}");
        return ExitCode::SUCCESS;
    }
    if json || !is_run {
        outln!(
            "{}",
            if data.is_null() {
                result.clone()
            } else {
                data.clone()
            }
        );
        return if result["isError"] == Value::Bool(true) {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    // A run for a person: the program's own output where it belongs, the summary on stderr,
    // the result (data) on stdout.
    out!("{}", data["stdout"].as_str().unwrap_or(""));
    if !data["result"].is_null() {
        outln!("{}", data["result"]);
    }
    let stderr = data["stderr"].as_str().unwrap_or("");
    if !stderr.is_empty() {
        err!("{stderr}");
    }
    let first = text_of(&result);
    errln!("{}", crate::printable(first.lines().next().unwrap_or("")));
    if result.to_string().contains("unknown tool:") {
        unknown_tool_hint(settings, profile.unwrap_or(DEFAULT_PROFILE));
    }
    if data["status"] == "ok" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
