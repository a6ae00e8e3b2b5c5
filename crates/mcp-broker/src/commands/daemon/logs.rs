//! `mcp-broker logs [-f] [-n N] [UPSTREAM]`: the daemon's log, or the lines of one upstream
//! (its stderr and what the daemon said of it), without knowing where the file lives.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;
use std::time::Duration;

use mcpb_config::Settings;

use crate::cli::LogsArgs;
use crate::fail;

/// Whether a log line is about `upstream` (`upstream=NAME` or `upstream="NAME"`).
fn about(line: &str, upstream: &str) -> bool {
    let plain = format!("upstream={upstream}");
    let quoted = format!("upstream=\"{upstream}\"");
    line.split_whitespace().any(|w| w == plain || w == quoted)
}

pub(crate) fn run(settings: &Settings, a: &LogsArgs) -> ExitCode {
    let (upstream, lines, follow) = (a.upstream.as_deref(), a.lines, a.follow);
    if let Some(name) = upstream
        && !settings.upstreams.contains_key(name)
    {
        let names: Vec<&str> = settings.upstreams.keys().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: no upstream named {name:?}"),
            &[&format!("upstreams: {}", names.join(", "))],
        );
    }
    let path = settings.runtime.log_path();
    let keep = |l: &str| upstream.is_none_or(|u| about(l, u));
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && follow => Vec::new(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail(
                &format!("mcp-broker: no log yet at {}", path.display()),
                &["the daemon writes it once it runs (`mcp-broker start`)"],
            );
        }
        Err(e) => {
            return fail(
                &format!("mcp-broker: cannot read {}: {e}", path.display()),
                &[],
            );
        }
    };
    // Where to follow from: the bytes read, not the length of their lossy text.
    let read_bytes = text.len() as u64;
    let text = String::from_utf8_lossy(&text);
    let wanted: Vec<&str> = text.lines().filter(|l| keep(l)).collect();
    for line in &wanted[wanted.len().saturating_sub(lines)..] {
        outln!("{line}");
    }
    if !follow {
        return ExitCode::SUCCESS;
    }
    let mut offset = read_bytes;
    let mut inode = std::fs::metadata(&path).map(|m| m.ino()).unwrap_or(0);
    let mut partial = String::new();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        // Rotated (a new file) or cut short: read the new one from its start.
        if meta.ino() != inode || meta.len() < offset {
            inode = meta.ino();
            offset = 0;
            partial.clear();
        }
        if meta.len() == offset {
            continue;
        }
        let Ok(mut f) = std::fs::File::open(&path) else {
            continue;
        };
        let mut fresh = Vec::new();
        if f.seek(SeekFrom::Start(offset)).is_err() || f.read_to_end(&mut fresh).is_err() {
            continue;
        }
        offset += fresh.len() as u64;
        partial.push_str(&String::from_utf8_lossy(&fresh));
        while let Some(end) = partial.find('\n') {
            let line: String = partial.drain(..=end).collect();
            let line = line.trim_end_matches('\n');
            if keep(line) {
                outln!("{line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_are_picked_by_their_upstream_field_only() {
        assert!(super::about(
            "… INFO upstream_stderr: boom upstream=git",
            "git"
        ));
        assert!(super::about(
            "… ERROR x: failed upstream=\"git\" error=y",
            "git"
        ));
        assert!(!super::about(
            "… INFO upstream_stderr: boom upstream=gitlab",
            "git"
        ));
        assert!(!super::about("… the git upstream", "git"));
    }
}
