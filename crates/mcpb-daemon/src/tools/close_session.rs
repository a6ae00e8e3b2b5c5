//! `broker.close_session`: stops the caller's own per-session instances of the profile's
//! upstreams; shared ones keep running.

use serde_json::{Value, json};

use super::tool_result;
use crate::view::ProfileView;

pub(super) async fn apply(view: &ProfileView) -> Value {
    let mut released = Vec::new();
    for up in view.upstreams() {
        if up.release_session(view.session).await {
            released.push(up.name().to_string());
        }
    }
    tool_result(json!({"released": released}))
}
