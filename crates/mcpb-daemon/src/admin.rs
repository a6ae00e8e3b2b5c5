//! Admin commands on the daemon socket (`mcpb_protocol::AdminCommand`): ping, status, reload,
//! stop, pins-reload and measure. Only `measure` starts upstreams (those whose tool lists are
//! unknown, on a session of its own that is released at the end); `stop` only asks the
//! listener to shut down.

use std::sync::Arc;

use mcpb_protocol::{AdminCommand, HelloReply};

use crate::broker::Broker;
use crate::view::View;

/// A session id no client gets: instances a measurement starts for itself.
const MEASURE_SESSION: u64 = u64::MAX;

/// The raw tool lists of a profile's upstreams (as a client loading them directly would see
/// them) and what the profile exposes instead. Starts upstreams whose lists are unknown.
async fn measure(broker: &Arc<Broker>, profile: mcpb_config::ProfileSettings) -> serde_json::Value {
    let view = broker.view(Arc::new(profile), MEASURE_SESSION);
    let upstreams: Vec<serde_json::Value> = view
        .raw_lists()
        .await
        .into_iter()
        .map(|(name, got)| match got {
            Ok(tools) => serde_json::json!({"name": name, "tools": *tools}),
            Err(e) => serde_json::json!({"name": name, "error": e}),
        })
        .collect();
    let exposed = view
        .list(
            View::choose(view.profile(), false),
            crate::tools::listed_for(view.profile()),
        )
        .await
        .and_then(|l| {
            serde_json::to_value(&l)
                .map_err(|e| mcpb_protocol::BrokerRpcError::Internal(e.to_string()))
        })
        .unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}));
    // Every tool the profile reaches (raw, through the facade or a code run), by its owner's
    // name: what `parity` compares across profiles whatever their name styles.
    let reachable: Vec<serde_json::Value> = view
        .tools()
        .await
        .iter()
        .map(|t| {
            serde_json::json!({"upstream": t.upstream.name(), "tool": t.tool_name(),
                "name": t.exposed, "mutating": t.mutating})
        })
        .collect();
    view.release_session().await;
    serde_json::json!({"profile": view.profile().name, "upstreams": upstreams, "exposed": exposed,
        "reachable": reachable})
}

/// What an admin command is about.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct About<'a> {
    pub(crate) profile: Option<&'a str>,
    pub(crate) upstream: Option<&'a str>,
}

/// Answers one admin command. `stop` only requests the shutdown; the listener carries it out.
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the outer arm admits the three upstream actions only"
)]
pub(crate) async fn handle(
    broker: &Arc<Broker>,
    command: &str,
    about: About<'_>,
    stop: &tokio::sync::Notify,
    shutdown: &tokio::sync::watch::Receiver<bool>,
) -> HelloReply {
    let profile = about.profile;
    let Some(command) = AdminCommand::parse(command) else {
        return HelloReply::refuse(
            format!("unknown admin command '{command}'"),
            vec![format!("known commands: {}", AdminCommand::names())],
        );
    };
    let mut reply = HelloReply {
        ok: true,
        daemon_pid: std::process::id(),
        daemon_version: env!("CARGO_PKG_VERSION").to_string(),
        ..HelloReply::default()
    };
    match command {
        AdminCommand::Ping => {}
        AdminCommand::Status => {
            reply.data = serde_json::to_value(crate::report::status(broker)).ok()
        }
        AdminCommand::Reload => match crate::reload::reload(broker) {
            Ok(report) => reply.data = serde_json::to_value(report).ok(),
            Err(errors) => {
                return HelloReply::refuse(
                    errors,
                    vec!["the daemon keeps serving the previous configuration".into()],
                );
            }
        },
        AdminCommand::PinsReload => {
            broker.known.reload_pins();
            for up in broker.config().upstreams.keys() {
                broker.registry.list_changed(up);
            }
        }
        AdminCommand::Measure => {
            match measure_profile(broker, profile.unwrap_or("default")).await {
                Ok(data) => reply.data = Some(data),
                Err(refused) => return *refused,
            }
        }
        AdminCommand::Stop => {
            tracing::info!("stop requested over the admin socket");
            stop.notify_one();
        }
        AdminCommand::Console => match crate::console::open(broker, shutdown.clone()) {
            Ok(url) => reply.data = Some(serde_json::json!({ "url": url })),
            Err(e) => {
                return HelloReply::refuse(
                    e,
                    vec!["set console.enabled: true (and console.listen to a free loopback port), then `mcp-broker reload`".into()],
                );
            }
        },
        AdminCommand::UpstreamStart
        | AdminCommand::UpstreamStop
        | AdminCommand::UpstreamRestart => {
            let action = match command {
                AdminCommand::UpstreamStart => mcpb_console::UpstreamAction::Start,
                AdminCommand::UpstreamStop => mcpb_console::UpstreamAction::Stop,
                _ => mcpb_console::UpstreamAction::Restart,
            };
            let name = about.upstream.unwrap_or_default();
            match upstream_action(broker, name, action).await {
                Ok(data) => reply.data = Some(data),
                Err(refused) => return *refused,
            }
        }
    }
    reply
}

/// `measure` of the profile `name`, or the refusal naming the known profiles.
async fn measure_profile(
    broker: &Arc<Broker>,
    name: &str,
) -> Result<serde_json::Value, Box<HelloReply>> {
    let Some(p) = broker.profile(name) else {
        return Err(Box::new(HelloReply::refuse(
            format!("unknown profile '{name}'"),
            vec![format!(
                "known profiles: {}",
                broker.config().profile_names()
            )],
        )));
    };
    Ok(measure(broker, p).await)
}

/// Starts, stops or restarts the upstream `name` as the console would; what it said, or the
/// refusal with its hints.
async fn upstream_action(
    broker: &Arc<Broker>,
    name: &str,
    action: mcpb_console::UpstreamAction,
) -> Result<serde_json::Value, Box<HelloReply>> {
    let outcome = crate::console::upstream_action(broker, name, action).await;
    if !outcome.ok {
        let mut lines = outcome.text.lines();
        let first = lines.next().unwrap_or_default().to_string();
        let hints = lines
            .map(|l| l.trim_start_matches("hint: ").to_string())
            .collect();
        return Err(Box::new(HelloReply::refuse(first, hints)));
    }
    Ok(serde_json::json!({ "said": outcome.text }))
}
