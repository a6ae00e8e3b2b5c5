//! `mcp-broker parity P1 P2`: whether two profiles discover the same tools. Tools are compared
//! by their owner's names (upstream and tool), so a compact profile and a raw one, or two name
//! styles, compare equal when they reach the same tools; then each upstream's smoke query (when
//! the config has one) is searched in both profiles and the top results compared. The exit
//! code says whether they differ. Starts upstreams whose tool lists are unknown, as `measure`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use mcpb_config::Settings;
use mcpb_daemon::tools::BrokerTool;
use mcpb_daemon::tools::search_tools;
use mcpb_protocol::AdminCommand;
use serde_json::{Value, json};

use crate::cli::ParityArgs;
use crate::commands::render::table;
use crate::commands::tools::call_facade;
use crate::daemon_client::{admin_about, connect_or_start_for_cli};
use crate::fail;

/// Top results of a smoke query compared between the profiles.
const TOP: usize = 5;

/// What one profile reaches: per upstream, its tools by their own names; and each exposed
/// name's owner, to read search results.
#[derive(Default)]
pub(crate) struct Reach {
    pub(crate) tools: BTreeMap<String, BTreeSet<String>>,
    owners: BTreeMap<String, (String, String)>,
    /// Upstreams whose tools could not be listed, and why: the comparison is incomplete.
    pub(crate) unlisted: BTreeMap<String, String>,
}

impl Reach {
    /// The name the profile shows `upstream`'s `tool` under.
    pub(crate) fn exposed(&self, upstream: &str, tool: &str) -> Option<&str> {
        self.owners
            .iter()
            .find(|(_, (u, t))| u == upstream && t == tool)
            .map(|(n, _)| n.as_str())
    }
}

pub(crate) fn reach(settings: &Settings, profile: &str) -> Result<Reach, String> {
    let reply = admin_about(settings, AdminCommand::Measure, Some(profile))
        .map_err(|e| format!("{e:#}"))?
        .ok_or("the daemon stopped before answering")?;
    if !reply.ok {
        return Err(reply.error.unwrap_or_default());
    }
    let data = reply.data.unwrap_or_default();
    let mut r = Reach::default();
    for up in data["upstreams"].as_array().into_iter().flatten() {
        if let Some(e) = up["error"].as_str() {
            let name = up["name"].as_str().unwrap_or("?");
            errln!("mcp-broker: {profile}: upstream '{name}' could not be listed: {e}");
            r.unlisted.insert(name.to_string(), e.to_string());
        }
    }
    for t in data["reachable"].as_array().into_iter().flatten() {
        let (Some(up), Some(tool), Some(name)) = (
            t["upstream"].as_str(),
            t["tool"].as_str(),
            t["name"].as_str(),
        ) else {
            continue;
        };
        r.tools
            .entry(up.to_string())
            .or_default()
            .insert(tool.to_string());
        r.owners
            .insert(name.to_string(), (up.to_string(), tool.to_string()));
    }
    Ok(r)
}

/// The top results of `query` on `upstream` in `profile`, as `upstream.tool` of their owners.
fn top(
    settings: &Settings,
    profile: &str,
    reach: &Reach,
    upstream: &str,
    query: &str,
) -> Vec<String> {
    let args = search_tools::Args {
        query: query.to_string(),
        server: Some(upstream.to_string()),
        limit: Some(TOP),
        kind: None,
    };
    let got = call_facade(
        settings,
        Some(profile),
        search_tools::SearchTools::VERB,
        serde_json::to_value(args).unwrap_or_default(),
    );
    got.ok()
        .and_then(|r| r["structuredContent"]["results"].as_array().cloned())
        .into_iter()
        .flatten()
        .filter_map(|x| {
            let name = x["name"].as_str()?;
            let (up, tool) = reach.owners.get(name)?;
            Some(format!("{up}.{tool}"))
        })
        .collect()
}

fn names(set: &BTreeSet<&String>) -> String {
    set.iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per upstream, the tools each side discovers: the table's rows and the JSON's.
fn compare_tools(ra: &Reach, rb: &Reach, differ: &mut bool) -> (Vec<Vec<String>>, Vec<Value>) {
    let empty = BTreeSet::new();
    let ups: BTreeSet<&String> = ra.tools.keys().chain(rb.tools.keys()).collect();
    let mut rows = Vec::new();
    let mut report = Vec::new();
    for up in ups {
        let (ta, tb) = (
            ra.tools.get(up).unwrap_or(&empty),
            rb.tools.get(up).unwrap_or(&empty),
        );
        let only_a: BTreeSet<&String> = ta.difference(tb).collect();
        let only_b: BTreeSet<&String> = tb.difference(ta).collect();
        *differ |= !only_a.is_empty() || !only_b.is_empty();
        rows.push(vec![
            up.clone(),
            ta.len().to_string(),
            tb.len().to_string(),
            ta.intersection(tb).count().to_string(),
            names(&only_a),
            names(&only_b),
        ]);
        report.push(
            json!({"upstream": up, "first": ta.len(), "second": tb.len(),
            "only_in_first": only_a, "only_in_second": only_b}),
        );
    }
    (rows, report)
}

/// Each upstream's smoke query searched through both profiles: (upstream, query, top of
/// each).
fn compare_searches(
    settings: &Settings,
    (a, ra): (&str, &Reach),
    (b, rb): (&str, &Reach),
    differ: &mut bool,
) -> Vec<(String, String, Vec<String>, Vec<String>)> {
    let mut searches = Vec::new();
    for (name, up) in &settings.upstreams {
        let Some(query) = up.smoke.as_ref().and_then(|s| s.query.as_deref()) else {
            continue;
        };
        if !ra.tools.contains_key(name) || !rb.tools.contains_key(name) {
            continue;
        }
        let (sa, sb) = (
            top(settings, a, ra, name, query),
            top(settings, b, rb, name, query),
        );
        *differ |= sa != sb;
        searches.push((name.clone(), query.to_string(), sa, sb));
    }
    searches
}

/// The comparison as a table and one line per search.
fn say(
    a: &str,
    b: &str,
    rows: Vec<Vec<String>>,
    searches: &[(String, String, Vec<String>, Vec<String>)],
) {
    let (only_a, only_b) = (format!("ONLY {a}"), format!("ONLY {b}"));
    out!(
        "{}",
        table(&["UPSTREAM", a, b, "BOTH", &only_a, &only_b], rows)
    );
    for (up, q, sa, sb) in searches {
        if sa == sb {
            outln!("search {up} {q:?}: same top {}", sa.len());
        } else {
            outln!(
                "search {up} {q:?}: {a}: {}; {b}: {}",
                sa.join(", "),
                sb.join(", ")
            );
        }
    }
}

fn verdict(a: &str, b: &str, incomplete: bool, differ: bool) {
    if incomplete {
        errln!("mcp-broker: incomplete: an upstream could not be listed (see above)");
        errln!("hint: `mcp-broker status` shows why; `mcp-broker logs UPSTREAM` its output");
    } else if differ {
        errln!("mcp-broker: {a} and {b} do not discover the same tools");
        errln!(
            "hint: compare their `upstreams`, `tools_allow`/`tools_deny` and mutating settings with `mcp-broker config show`"
        );
    } else {
        errln!("mcp-broker: {a} and {b} discover the same tools");
    }
}

/// `mcp-broker parity A B`.
pub(crate) fn run(settings: &Settings, args: &ParityArgs) -> ExitCode {
    let (a, b, json_out) = (args.first.as_str(), args.second.as_str(), args.json);
    if a == b {
        return fail(
            &format!("mcp-broker: parity compares two profiles; {a} was given twice"),
            &[],
        );
    }
    let known: Vec<&str> = settings.profiles.keys().map(String::as_str).collect();
    if let Some(unknown) = [a, b]
        .into_iter()
        .find(|p| !settings.profiles.contains_key(*p))
    {
        return fail(
            &format!("mcp-broker: no profile named {unknown:?}"),
            &[&format!("profiles: {}", known.join(", "))],
        );
    }
    if let Err(e) = connect_or_start_for_cli(settings) {
        return fail(&format!("mcp-broker: cannot reach the daemon: {e:#}"), &[]);
    }
    let (ra, rb) = match (reach(settings, a), reach(settings, b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return fail(&format!("mcp-broker: {e}"), &[]),
    };
    // An upstream one side could not list makes the comparison incomplete: never "the same".
    let mut differ = !ra.unlisted.is_empty() || !rb.unlisted.is_empty();
    let (rows, report) = compare_tools(&ra, &rb, &mut differ);
    let searches = compare_searches(settings, (a, &ra), (b, &rb), &mut differ);
    if json_out {
        let searches: Vec<Value> = searches
            .iter()
            .map(|(up, q, sa, sb)| {
                json!({"upstream": up, "query": q, "first": sa, "second": sb, "same": sa == sb})
            })
            .collect();
        outln!(
            "{}",
            json!({"profiles": [a, b], "same": !differ, "upstreams": report, "searches": searches,
                "unlisted": {"first": ra.unlisted, "second": rb.unlisted}})
        );
    } else {
        say(a, b, rows, &searches);
        let incomplete = !ra.unlisted.is_empty() || !rb.unlisted.is_empty();
        verdict(a, b, incomplete, differ);
    }
    if differ {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
