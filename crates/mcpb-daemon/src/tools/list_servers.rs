//! `broker.list_servers`: the profile's upstreams from configuration and known lists; starts
//! nothing.

use serde_json::{Value, json};

use super::tool_result;
use crate::view::ProfileView;

pub(super) fn apply(view: &ProfileView) -> Value {
    let servers: Vec<Value> = view
        .upstreams()
        .iter()
        .map(|up| {
            let s = up.settings();
            json!({
                "name": s.name,
                "description": s.description,
                "tags": s.tags,
                "tools": view.known_count(up),
                "state": up.status().state,
            })
        })
        .collect();
    tool_result(json!({"servers": servers}))
}
