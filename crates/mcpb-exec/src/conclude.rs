//! How a run ended, in one answer: the sandbox's events, what overrules them (a refused layer,
//! abuse of the SDK, the wall clock, a limit), and the output fitted to `max_output_kb`.

use mcpb_config::Limits;
use mcpb_sandbox::{Event, Layer};
use serde_json::Value;

use crate::answer::{RunAnswer, Status, Usage};
use crate::output::Output;
use crate::sdk::Calls;

/// How a run ended, beyond its answer: whether its workspace changes may be kept.
pub struct Ran {
    pub answer: RunAnswer,
    pub keep_workspace: bool,
}

pub(crate) struct Concluded {
    pub(crate) events: Vec<Event>,
    pub(crate) timed_out: bool,
    pub(crate) abuse: Option<String>,
    pub(crate) calls: Calls,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) wall_ms: u64,
    pub(crate) limits: Limits,
}

fn signal_reason(sig: i32) -> (Status, String) {
    match sig {
        mcpb_sandbox::SIGSYS => (
            Status::Violation,
            "the sandbox killed the program for a forbidden system call (seccomp, SIGSYS)".into(),
        ),
        24 => (
            Status::Limit,
            "the CPU time limit was reached (SIGXCPU)".into(),
        ),
        25 => (Status::Limit, "file_size_kb was reached (SIGXFSZ)".into()),
        9 => (
            Status::Limit,
            "killed (SIGKILL): the memory limit is the usual cause".into(),
        ),
        s => (Status::Error, format!("killed by signal {s}")),
    }
}

/// What the sandbox's events said about a run, before anything overrules it.
struct Reported {
    status: Status,
    reason: Option<String>,
    keep: bool,
    cpu_ms: u64,
    max_rss_kb: u64,
    layers: Vec<(String, u64)>,
    refusal: Option<(Layer, String)>,
    oom: bool,
    exited: bool,
}

fn reported(events: &[Event]) -> Reported {
    let mut r = Reported {
        status: Status::Ok,
        reason: None,
        keep: false,
        cpu_ms: 0,
        max_rss_kb: 0,
        layers: Vec::new(),
        refusal: None,
        oom: false,
        exited: false,
    };
    for e in events {
        match e {
            Event::Applied { layer, us } => r.layers.push((layer.name().to_string(), *us)),
            Event::Refused { layer, reason } => {
                r.refusal.get_or_insert((*layer, reason.clone()));
            }
            Event::Exited {
                code,
                signal,
                cpu_ms,
                max_rss_kb,
            } => {
                r.exited = true;
                r.cpu_ms = *cpu_ms;
                r.max_rss_kb = *max_rss_kb;
                if let Some(s) = signal {
                    let (st, why) = signal_reason(*s);
                    (r.status, r.reason) = (st, Some(why));
                } else if *code != Some(0) {
                    r.status = Status::Error;
                    r.reason = Some(format!(
                        "the program exited with status {}",
                        code.unwrap_or(-1)
                    ));
                }
            }
            Event::OutOfMemory => r.oom = true,
            Event::Saved { complete, .. } => {
                r.keep = true;
                if !complete && r.status == Status::Ok {
                    r.status = Status::Limit;
                    r.reason =
                        Some("the workspace went over disk_kb: some files were not kept".into());
                }
            }
        }
    }
    r
}

/// What overrules the program's own ending, strongest first: a sandbox layer refused, abuse
/// of the SDK, the wall clock, no report at all; then a call limit or the memory cgroup.
fn overrule(r: &mut Reported, c: &Concluded) {
    if r.oom && r.refusal.is_none() && !c.timed_out {
        r.status = Status::Limit;
        r.reason = Some(format!(
            "the run went over its memory ({} MiB with its workspace): the kernel stopped it",
            c.limits.memory_mb
        ));
    }
    let (status, reason) = if let Some((layer, why)) = &r.refusal {
        let mut text = format!(
            "sandbox layer '{}' could not be applied: {why}",
            layer.name()
        );
        if *layer == Layer::UserNamespace
            && let Some(h) = mcpb_sandbox::userns_hint()
        {
            text.push_str("\nhint: ");
            text.push_str(&h);
        }
        (Status::Refused, text)
    } else if let Some(a) = &c.abuse {
        (Status::Violation, a.clone())
    } else if c.timed_out {
        let text = format!(
            "wall_clock_ms ({} ms) passed; every process of the run was killed",
            c.limits.wall_clock_ms
        );
        (Status::Timeout, text)
    } else if !r.exited {
        let text = "the sandbox ended without reporting how the program did".to_string();
        (Status::Error, text)
    } else {
        if r.status == Status::Ok
            && let Some(l) = &c.calls.limit_hit
        {
            r.status = Status::Limit;
            r.reason = Some(l.clone());
        }
        return;
    };
    r.status = status;
    r.reason = Some(reason);
    r.keep = false;
}

pub(crate) fn conclude(c: Concluded) -> Ran {
    let mut r = reported(&c.events);
    overrule(&mut r, &c);
    let budget = usize::try_from(c.limits.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX);
    // The result is parsed only once it is known to fit the answer: a program's result of any
    // size costs the daemon its bytes once, never a tree of them.
    let result_text = c.calls.result.as_ref().map_or("null", |(r, _)| r.get());
    let result_len = result_text.len();
    let produced = (result_len + c.stdout.produced() + c.stderr.produced()) as u64;
    let (result, left) = if result_len > budget {
        let cut: String = result_text.chars().take(budget / 2).collect();
        (
            Value::String(format!("{cut}[... result cut: over max_output_kb]")),
            budget / 2,
        )
    } else {
        (
            serde_json::from_str(result_text).unwrap_or(Value::Null),
            budget - result_len,
        )
    };
    let (stdout, stderr, cut) = Output::fit(c.stdout, c.stderr, left);
    let truncated = cut || result_len > budget;
    if truncated && r.status == Status::Ok {
        r.status = Status::Limit;
        r.reason = Some(format!(
            "output went over max_output_kb ({} KiB) and was cut",
            c.limits.max_output_kb
        ));
    }
    Ran {
        answer: RunAnswer {
            status: r.status,
            result,
            stdout,
            stderr,
            usage: Usage {
                wall_ms: c.wall_ms,
                cpu_ms: r.cpu_ms,
                max_rss_kb: r.max_rss_kb,
                calls: c.calls.made,
                output_bytes: produced,
                uid: None,
            },
            calls: c.calls.records,
            artifacts: c.calls.artifacts,
            reason: r.reason,
            truncated,
            layers: r.layers,
        },
        keep_workspace: r.keep,
    }
}
