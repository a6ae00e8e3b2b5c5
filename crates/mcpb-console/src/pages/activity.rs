//! Activity: the audit log as a filterable table (newest first), and the calls as they happen
//! (server-sent events, added to the page by console.js).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use maud::{Markup, html};
use serde_json::Value;

use super::text;

/// How much of the log's end is read for the table: a few thousand lines, enough for the
/// newest 200 of most filters, and little for a daemon whose allocator keeps what it read.
const TAIL_BYTES: u64 = 512 << 10;
/// Rows shown at most.
pub(crate) const MAX_ROWS: usize = 200;

/// What the table is narrowed to; an empty field matches everything.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    pub upstream: String,
    pub tool: String,
    pub outcome: String,
    pub client: String,
}

impl Filter {
    pub(crate) fn from_query(query: &str) -> Self {
        let mut f = Self::default();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            let v = v.trim().to_string();
            match k.as_ref() {
                "upstream" => f.upstream = v,
                "tool" => f.tool = v,
                "outcome" => f.outcome = v,
                "client" => f.client = v,
                _ => {}
            }
        }
        f
    }

    /// Upstream, outcome and client match whole; the tool's name by a part of it.
    pub(crate) fn matches(&self, line: &Value) -> bool {
        let is = |want: &str, key: &str| want.is_empty() || text(line, key) == want;
        let tool = text(line, "tool");
        is(&self.upstream, "upstream")
            && is(&self.outcome, "outcome")
            && is(&self.client, "client")
            && (self.tool.is_empty() || tool.contains(self.tool.as_str()))
    }
}

/// The newest lines of the log that match, newest first; a line that is not JSON is skipped
/// (a write cut short by a crash).
pub(crate) fn read(path: &Path, filter: &Filter) -> std::io::Result<Vec<Value>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes)?;
    let mut lines: &[u8] = &bytes;
    // Reading from the middle of the file starts inside a line: that part is dropped.
    if start > 0
        && let Some(i) = lines.iter().position(|b| *b == b'\n')
    {
        lines = &lines[i + 1..];
    }
    Ok(lines
        .split(|b| *b == b'\n')
        .rev()
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(|v| filter.matches(v))
        .take(MAX_ROWS)
        .collect())
}

pub(crate) fn render(filter: &Filter, rows: &Result<Vec<Value>, String>, audited: bool) -> Markup {
    html! {
        form.filters method="get" action="activity" {
            label { "upstream " input type="text" name="upstream" value=(filter.upstream); }
            label { "tool " input type="text" name="tool" value=(filter.tool); }
            label { "outcome "
                select name="outcome" {
                    @for o in ["", "ok", "tool_error", "error", "abandoned"] {
                        option value=(o) selected[o == filter.outcome] { (if o.is_empty() { "any" } else { o }) }
                    }
                }
            }
            label { "client " input type="text" name="client" value=(filter.client); }
            button type="submit" { "filter" }
        }
        h2 { "live" }
        p.summary #live-state { "connecting…" }
        table #live {
            thead { (head()) }
            tbody #live-rows {}
        }
        h2 { "audit log" }
        @if !audited {
            p { "Calls are not audited (" code { "broker.audit.enabled: false" } ")." }
        }
        @match rows {
            Err(e) => p.error { (e) },
            Ok(rows) => {
                p.summary #audit-count { (rows.len()) " line(s)" @if rows.len() == MAX_ROWS { " (the newest " (MAX_ROWS) ")" } }
                table #audit {
                    thead { (head()) }
                    tbody { @for r in rows { (row(r)) } }
                }
            }
        }
    }
}

fn head() -> Markup {
    html! { tr { th { "time" } th { "client" } th { "profile" } th { "upstream" } th { "tool" } th { "outcome" } th { "ms" } th { "error" } } }
}

fn row(r: &Value) -> Markup {
    let event = text(r, "event");
    html! {
        tr class={ "outcome-" (text(r, "outcome")) } {
            td { (text(r, "ts")) }
            td { (text(r, "client")) }
            td { (text(r, "profile")) }
            td { (text(r, "upstream")) }
            td.name { (text(r, "tool")) }
            td { @if event.is_empty() { (text(r, "outcome")) } @else { (event) " by " (text(r, "by")) } }
            td { (r["ms"].as_f64().map(|m| format!("{m:.2}")).unwrap_or_default()) }
            td { (text(r, "error")) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_whole_fields_and_part_of_a_tool_name() {
        let line = serde_json::json!({"upstream": "fs", "tool": "read_file", "outcome": "ok", "client": "cli"});
        assert!(Filter::default().matches(&line));
        assert!(Filter::from_query("upstream=fs&tool=read").matches(&line));
        assert!(!Filter::from_query("upstream=f").matches(&line));
        assert!(!Filter::from_query("outcome=error").matches(&line));
        assert!(Filter::from_query("client=+cli+").matches(&line));
    }

    #[test]
    fn reads_the_newest_matching_lines_and_skips_broken_ones() {
        let dir = std::env::temp_dir().join(format!("mcpb-console-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let mut body = String::new();
        for i in 0..300 {
            body.push_str(&format!(
                "{{\"upstream\":\"u{}\",\"tool\":\"t{i}\"}}\n",
                i % 2
            ));
        }
        body.push_str("{\"cut short");
        std::fs::write(&path, body).unwrap();
        let rows = read(&path, &Filter::from_query("upstream=u1")).unwrap();
        assert_eq!(rows.len(), 150);
        assert_eq!(rows[0]["tool"], "t299");
        let all = read(&path, &Filter::default()).unwrap();
        assert_eq!(all.len(), MAX_ROWS);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
