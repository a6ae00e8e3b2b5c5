//! The pages, rendered on the server. maud escapes every value it interpolates: tool names,
//! descriptions and schemas come from upstreams and are hostile until shown otherwise.

use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use crate::backend::Outcome;

pub(crate) mod activity;
pub(crate) mod charts;
pub(crate) mod context;
pub(crate) mod servers;
pub(crate) mod tools;
pub(crate) mod trust;

/// The pages in the navigation, by path and title.
const NAV: [(&str, &str); 6] = [
    ("/servers", "Servers"),
    ("/tools", "Tools"),
    ("/trust", "Trust"),
    ("/activity", "Activity"),
    ("/context", "Context"),
    ("/charts", "Charts"),
];

/// A whole page: navigation, the last action's outcome (once), then `body`.
pub(crate) fn page(path: &str, flash: Option<&Outcome>, body: Markup) -> String {
    let title = NAV
        .iter()
        .find(|(p, _)| *p == path)
        .map_or("mcp-broker", |(_, t)| t);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · mcp-broker" }
                link rel="stylesheet" href="assets/console.css";
                link rel="icon" href="assets/favicon.svg" type="image/svg+xml";
                script src="assets/console.js" defer {}
            }
            body {
                header {
                    span.brand { "mcp-broker" }
                    nav {
                        @for (p, t) in NAV {
                            a href=(p.trim_start_matches('/')) class=[(p == path).then_some("here")] { (t) }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    @if let Some(f) = flash {
                        pre class=(if f.ok { "flash ok" } else { "flash failed" }) id="flash" { (f.text) }
                    }
                    (body)
                }
            }
        }
    }
    .into_string()
}

/// A plain page for a refusal: what happened and what to do.
pub(crate) fn refusal(what: &str, hint: &str) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "mcp-broker console" } }
            body {
                p { (what) }
                p { "hint: " (hint) }
            }
        }
    }
    .into_string()
}

/// The hidden field every action's form carries.
pub(crate) fn csrf_field(token: &str) -> Markup {
    html! { input type="hidden" name=(crate::access::CSRF_FIELD) value=(token); }
}

pub(crate) fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.1} ms"))
}

/// JSON shown as indented text (escaped like any other value).
pub(crate) fn json_block(v: &Value) -> Markup {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    html! { pre.json { (text) } }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::backend::{Bucket, Outcome, Series, ToolRow};

    const CSRF: &str = "c0ffee";

    /// An upstream that chose its own name, description and stderr to attack the page.
    fn hostile() -> &'static str {
        "<script>alert(1)</script><img src=x onerror=alert(2)>"
    }

    #[test]
    fn servers_page_shows_state_errors_and_actions() {
        let status = json!({
            "daemon": {"pid": 42, "version": "0.1.0", "sessions": 2, "inflight_calls": 0, "config": "/home/u/broker.yaml"},
            "upstreams": [
                {"name": "fs", "state": "running", "lifecycle": "shared", "pids": [101], "sandboxed": true,
                 "sandbox": {"read": ["/a", "/b"], "write": ["/w"], "network": false}, "stderr_tail": []},
                {"name": "broken", "state": "failed", "lifecycle": "shared", "pids": [],
                 "last_error": "exited with status 3 before answering initialize",
                 "stderr_tail": ["Error: cannot find module 'x'"]}
            ],
            "calls": {"upstreams": {"fs": {"calls": 7, "errors": 1, "p50_ms": 1.25, "p99_ms": 9.5}}}
        });
        let html = super::page("/servers", None, super::servers::render(&status, CSRF));
        insta::assert_snapshot!(html);
    }

    #[test]
    fn hostile_text_from_upstreams_is_shown_as_text() {
        let h = hostile();
        let status = json!({"daemon": {}, "upstreams": [{"name": h, "state": h, "last_error": h, "stderr_tail": [h]}], "calls": {}});
        let tools = vec![ToolRow {
            name: h.into(),
            server: h.into(),
            description: h.into(),
            mutating: false,
            profiles: vec![h.into()],
        }];
        let pins = json!({"tools": [{"tool": h, "quarantine": {"reason": "new"}, "diff": h,
            "findings": [{"kind": h, "detail": h}]}]});
        let audit = vec![json!({"tool": h, "error": h, "client": h, "outcome": h})];
        let flash = Outcome {
            ok: false,
            text: h.into(),
        };
        let pages = [
            super::page(
                "/servers",
                Some(&flash),
                super::servers::render(&status, CSRF),
            ),
            super::page(
                "/tools",
                None,
                super::tools::render(&[(h.into(), vec![])], h, h, &Ok(tools)),
            ),
            super::page(
                "/tools",
                None,
                super::tools::render_one(
                    h,
                    h,
                    Some(&json!({"description": h, "inputSchema": {"title": h}})),
                ),
            ),
            super::page("/trust", None, super::trust::render(&Ok(pins), CSRF)),
            super::page(
                "/activity",
                None,
                super::activity::render(&Default::default(), &Ok(audit), true),
            ),
            super::page(
                "/charts",
                None,
                super::charts::render(&[Series {
                    upstream: h.into(),
                    buckets: vec![Bucket::default()],
                }]),
            ),
        ];
        for p in pages {
            assert!(!p.contains("<script>alert"), "{p}");
            assert!(!p.contains("<img"), "{p}");
            assert!(p.contains("&lt;script&gt;"), "{p}");
        }
    }

    #[test]
    fn trust_page_offers_approval_with_the_diff_and_findings() {
        let pins = json!({"tools": [
            {"tool": "fx.helper", "quarantine": {"reason": "changed"}, "why": "its definition changed", "diff": "-old\n+new\n",
             "findings": [{"kind": "instruction", "detail": "asks to read ~/.ssh"}]},
            {"tool": "fx.lookup", "quarantine": null, "findings": []}
        ]});
        let html = super::trust::render(&Ok(pins), CSRF).into_string();
        assert!(html.contains("1 quarantined"), "{html}");
        assert!(
            html.contains("quarantined: its definition changed"),
            "{html}"
        );
        assert!(html.contains("+new"), "{html}");
        assert!(html.contains("asks to read ~/.ssh"), "{html}");
        assert!(html.contains(r#"name="tool" value="fx.helper""#), "{html}");
        assert!(
            html.contains(&format!(r#"name="csrf" value="{CSRF}""#)),
            "{html}"
        );
        assert!(!html.contains(r#"value="fx.lookup""#), "{html}");
    }

    #[test]
    fn charts_scale_to_the_busiest_minute() {
        let buckets = vec![
            Bucket {
                minute: 0,
                calls: 60,
                errors: 0,
                ms_sum: 60.0,
                ms_max: 2.0,
            },
            Bucket {
                minute: 60,
                calls: 30,
                errors: 3,
                ms_sum: 90.0,
                ms_max: 9.0,
            },
        ];
        let html = super::charts::render(&[Series {
            upstream: "fs".into(),
            buckets,
        }])
        .into_string();
        assert!(html.contains("00:01 UTC: 30 calls"), "{html}");
        assert!(
            html.contains("00:01 UTC: mean 3.0 ms, max 9.0 ms"),
            "{html}"
        );
        assert!(html.contains("calls/min: max 60<"), "{html}");
        assert!(!html.contains("No call in the last hour"), "{html}");
    }
}
