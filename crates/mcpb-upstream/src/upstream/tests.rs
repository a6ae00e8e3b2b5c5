//! Upstream decisions that need no process: state under its one lock, failfast, disabled
//! upstreams, what `status` reports while a start is under way.

use std::sync::Arc;
use std::time::Instant;

use mcpb_config::{ConfigSource, Lifecycle, ResolveContext, load_str};

use super::*;

fn upstream(lifecycle: &str) -> Arc<Upstream> {
    let text = format!(
        "schema_version: 1\nupstreams:\n  u: {{command: /nonexistent/server, lifecycle: {lifecycle}}}\n"
    );
    let settings = load_str(
        &text,
        "t",
        ConfigSource::Embedded,
        &ResolveContext::default(),
    )
    .unwrap();
    let ctx = UpstreamContext {
        state_dir: None,
        passthrough: Vec::new(),
        secrets_dir: std::env::temp_dir(),
        max_frame_bytes: 1 << 20,
        max_list_bytes: 1 << 20,
        max_list_tools: 100,
        forward_meta: Vec::new(),
        timings: StopTimings::default(),
        ledger: None,
        on_list_changed: None,
        on_notice: None,
        shared: Shared {
            processes: Arc::new(Semaphore::new(4)),
            max_processes: 4,
        },
    };
    Arc::new(Upstream::new(settings.upstreams["u"].clone(), ctx))
}

#[tokio::test]
async fn a_disabled_upstream_is_never_started() {
    let up = upstream("disabled");
    assert_eq!(up.status().state, UpstreamState::Disabled);
    assert!(matches!(
        up.tools(1).await,
        Err(UpstreamError::Disabled { .. })
    ));
    assert_eq!(up.status().starts, 0);
}

#[tokio::test]
async fn status_answers_while_a_start_holds_its_gate() {
    let up = upstream("shared");
    let _starting = up.shared_gate.lock().await;
    up.set_status(|s| s.state = UpstreamState::Starting);
    let s = up.status();
    assert_eq!(s.state, UpstreamState::Starting);
    assert_eq!(s.name, "u");
    assert!(s.pids.is_empty());
    assert!(!up.busy());
}

#[tokio::test]
async fn a_failfast_window_refuses_starts_at_once_with_the_last_error() {
    let up = upstream("shared");
    for _ in 0..5 {
        up.record_failure("exited (status 3)".into());
    }
    assert_eq!(up.failing().as_deref(), Some("exited (status 3)"));
    let started = Instant::now();
    match up.tools(1).await {
        Err(UpstreamError::Failfast {
            retry_in_s,
            last_error,
            ..
        }) => {
            assert!(retry_in_s >= 1);
            assert_eq!(last_error, "exited (status 3)");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed().as_millis() < 100,
        "no start, no backoff sleep"
    );
    let s = up.status();
    assert_eq!(s.failures, 5);
    assert!(s.failfast_until_unix.is_some());
    assert_eq!(s.state, UpstreamState::Failed);
}

#[test]
fn per_session_instances_are_kept_per_session() {
    let up = upstream("per_session");
    let mut state = up.state.lock();
    assert!(state.instance(Lifecycle::PerSession, 1).is_none());
    state.set_instance(Lifecycle::PerSession, 1, None);
    assert!(state.sessions.is_empty());
    assert!(state.running().is_empty());
    assert!(state.instance(Lifecycle::Shared, 1).is_none());
}

#[tokio::test]
async fn releasing_a_session_that_never_started_is_a_no_op() {
    let up = upstream("per_session");
    assert!(!up.release_session(3).await);
    up.stop().await;
    assert_eq!(up.status().state, UpstreamState::Stopped);
    assert_eq!(up.status().session_count, 0);
}

#[tokio::test(start_paused = true)]
async fn a_release_dropped_while_a_start_runs_leaves_the_session_releasable() {
    let up = upstream("per_session");
    let gate = up.gate_for(3);
    let starting = gate.clone().lock_owned().await;
    let release = {
        let up = up.clone();
        tokio::spawn(async move { up.release_session(3).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    release.abort();
    assert!(release.await.is_err(), "cancelled while the start ran");
    assert!(
        Arc::ptr_eq(&up.gate_for(3), &gate),
        "the same gate serves the session's next call"
    );
    drop(starting);
    assert!(!up.release_session(3).await, "no instance had started");
    assert!(up.state.lock().session_gates.is_empty());
}
