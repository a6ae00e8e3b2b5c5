//! `mcp-broker console` (the daemon's web console: its address, and a browser opened on it)
//! and `mcp-broker upstream start|stop|restart` (the console's buttons, from a terminal).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;

use mcpb_config::Settings;
use mcpb_protocol::{AdminCommand, HelloReply};

use crate::daemon_client::{admin, admin_upstream, connect_or_start_for_cli};
use crate::fail;

/// The reply's payload, or the refusal said as the CLI says failures.
fn answered(reply: anyhow::Result<Option<HelloReply>>) -> Result<serde_json::Value, ExitCode> {
    match reply {
        Ok(Some(r)) if r.ok => Ok(r.data.unwrap_or_default()),
        Ok(Some(r)) => {
            let hints: Vec<&str> = r.hints.iter().map(String::as_str).collect();
            Err(fail(
                &format!("mcp-broker: {}", r.error.unwrap_or_default()),
                &hints,
            ))
        }
        Ok(None) => Err(fail(
            "mcp-broker: the daemon stopped before answering",
            &["`mcp-broker logs` shows why"],
        )),
        Err(e) => Err(fail(&format!("mcp-broker: {e:#}"), &[])),
    }
}

pub(crate) fn console(settings: &Settings, open: bool) -> ExitCode {
    if let Err(e) = connect_or_start_for_cli(settings) {
        return fail(&format!("mcp-broker: cannot reach the daemon: {e:#}"), &[]);
    }
    let data = match answered(admin(settings, AdminCommand::Console)) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let Some(url) = data["url"].as_str() else {
        return fail("mcp-broker: the daemon answered without an address", &[]);
    };
    outln!("{url}");
    if open {
        match open_browser(settings, url) {
            Ok(true) => errln!("mcp-broker: opened the console in a browser"),
            Ok(false) => {
                errln!(
                    "hint: open the address above in a browser on this machine; it carries the console's key, so keep it to yourself"
                );
            }
            Err(e) => errln!(
                "mcp-broker: could not open a browser ({e}); open the address above yourself"
            ),
        }
    }
    ExitCode::SUCCESS
}

/// Opens the console in the desktop's browser when there is one. The browser is handed a page
/// of ours (readable by this user only) that forwards to the address: the key never appears
/// on a command line, where every user of the machine could read it.
fn open_browser(settings: &Settings, url: &str) -> std::io::Result<bool> {
    let desktop =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    // $BROWSER as the convention has it: commands separated by ':', `%s` for the address.
    let chosen = std::env::var("BROWSER").ok().and_then(|b| {
        b.split(':')
            .map(str::trim)
            .find(|c| !c.is_empty())
            .map(str::to_string)
    });
    let opener = match chosen {
        Some(b) => b,
        None if desktop => "xdg-open".to_string(),
        None => return Ok(false),
    };
    let page = settings.runtime.run_dir().join("console-open.html");
    let _ = std::fs::remove_file(&page);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&page)?;
    writeln!(
        file,
        "<!DOCTYPE html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>mcp-broker console</title><a href=\"{url}\">mcp-broker console</a>"
    )?;
    drop(file);
    let target = format!("file://{}", page.display());
    let mut words = opener.split_whitespace();
    let program = words.next().unwrap_or("xdg-open");
    let mut args: Vec<String> = words.map(|w| w.replace("%s", &target)).collect();
    if !opener.contains("%s") {
        args.push(target);
    }
    std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    Ok(true)
}

pub(crate) fn upstream(settings: &Settings, action: &str, name: &str) -> ExitCode {
    let command = match action {
        "start" => AdminCommand::UpstreamStart,
        "stop" => AdminCommand::UpstreamStop,
        _ => AdminCommand::UpstreamRestart,
    };
    if let Err(e) = connect_or_start_for_cli(settings) {
        return fail(&format!("mcp-broker: cannot reach the daemon: {e:#}"), &[]);
    }
    match answered(admin_upstream(settings, command, name)) {
        Ok(d) => {
            outln!("{}", d["said"].as_str().unwrap_or("done"));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
