//! What an import shows and keeps: the table of what moves and what stays, the variables the
//! daemon must have, and where the record of an import lives.

use crate::commands::client::import::scan::{Stays, masked};
use crate::commands::import::plan::{Fate, Plan};

pub(crate) use crate::commands::client::import::record::record_path;

/// The variables the moved servers still take from the daemon's environment.
/// `from`: whose file names them ("the client's file").
pub(crate) fn say_variables(plan: &Plan, from: &str) {
    if plan.variables.is_empty() {
        return;
    }
    let mut names: Vec<String> = plan
        .variables
        .iter()
        .map(|(v, u)| format!("{v} ({u})"))
        .collect();
    names.dedup();
    errln!(
        "{from} takes these from its environment; the daemon must have them too: {}",
        names.join(", ")
    );
    errln!(
        "hint: put each value in a file under the secrets dir and write ${{file:NAME}} instead, so no client's environment matters"
    );
}

/// What moved and what stays, per scope, with any secret in a reason hidden.
pub(crate) fn print_table(plan: &Plan, stays: &[Stays], mask: &[String]) {
    let mut rows = Vec::new();
    for f in &plan.found {
        let now = match &f.fate {
            Fate::Moved(u) => format!("moves: upstream {u}"),
            Fate::Same(u) => format!("moves: same as upstream {u}"),
            Fate::Kept(why) => format!("stays: {why}"),
            Fate::Off(why) => format!("stays, not started: {why}"),
        };
        rows.push(vec![
            f.place.label(),
            f.server.name.clone(),
            masked(&now, mask),
            f.place.path.display().to_string(),
        ]);
    }
    for s in stays {
        rows.push(vec![
            s.label.clone(),
            s.name.clone(),
            format!("stays: {}", s.why),
            s.file.clone(),
        ]);
    }
    out!(
        "{}",
        crate::commands::render::table(&["SCOPE", "SERVER", "NOW", "FILE"], rows)
    );
}
