//! The long form of code execution: `exec_open` → workspace id, `exec_upload`, `exec_run` (as
//! often as needed, each run seeing what the last one left), `exec_close`.

use std::sync::Arc;

use mcpb_facade::tools::exec::{ExecClose, ExecOpen, ExecRun, ExecUpload};
use mcpb_upstream::ClientLink;
use serde_json::{Value, json};

use super::{tool_error, tool_result};
use crate::view::ProfileView;

fn enabled(view: &ProfileView) -> Result<(), Value> {
    match view.profile.exec {
        Some(_) => Ok(()),
        None => Err(tool_error("code execution is off for this profile")),
    }
}

pub(super) fn open(view: &ProfileView, args: ExecOpen) -> Value {
    if let Err(e) = enabled(view) {
        return e;
    }
    match view.exec.workspaces.open(&view.profile.name, args.persist) {
        Ok(id) => {
            tool_result(json!({"exec_id": id.hyphenated().to_string(), "persist": args.persist}))
        }
        Err(e) => tool_error(e.to_string()),
    }
}

pub(super) fn upload(view: &ProfileView, args: ExecUpload) -> Value {
    if let Err(e) = enabled(view) {
        return e;
    }
    let ws = &view.exec.workspaces;
    // The workspace's quota is what a run's jail could hold: the profile's disk_kb.
    let quota = view
        .profile
        .exec
        .as_ref()
        .map_or(0, |e| e.limits.disk_kb.saturating_mul(1024));
    match ws.upload(
        &view.profile.name,
        &args.exec_id,
        &args.path,
        args.content.as_bytes(),
        quota,
    ) {
        Ok(bytes) => tool_result(json!({"path": args.path, "bytes": bytes})),
        Err(e) => tool_error(e.to_string()),
    }
}

pub(super) async fn run(view: &ProfileView, args: ExecRun, link: Arc<dyn ClientLink>) -> Value {
    let req = match super::run_code::request(view, args.run, args.code, args.entry) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let ws = &view.exec.workspaces;
    let lease = match ws.lease(&view.profile.name, &args.exec_id) {
        Ok(l) => l,
        Err(e) => return tool_error(e.to_string()),
    };
    let (value, keep) = super::run_code::run(view, &req, &lease, link).await;
    if keep {
        if let Err(e) = ws.commit(&lease) {
            tracing::error!(error = %e, "keeping a run's workspace failed");
        }
    } else {
        ws.discard(&lease);
    }
    value
}

pub(super) fn close(view: &ProfileView, args: ExecClose) -> Value {
    if let Err(e) = enabled(view) {
        return e;
    }
    match view
        .exec
        .workspaces
        .close(&view.profile.name, &args.exec_id, args.discard)
    {
        Ok(removed) => tool_result(json!({"exec_id": args.exec_id, "removed": removed})),
        Err(e) => tool_error(e.to_string()),
    }
}
