//! How the daemon's heap gives memory back. With glibc's defaults, the size above which an
//! allocation gets a mapping of its own rises to the largest block freed so far, so after one
//! large transient buffer (a 20,000-tool listing's 3 MB answer, a big result, a list's disk
//! copy) every later one of that size comes from the heap and stays there when freed: a
//! long-running daemon keeps its high-water mark. A fixed threshold returns such buffers to the
//! system when they are freed (measured: 20,000 tools, RSS after listing 77 -> 60 MiB,
//! docs/benchmarks.md). The tunables are read when a process starts, so the daemon re-executes
//! itself once with them, before it starts any thread; upstreams never see them (their
//! environment is cleared).

use std::os::unix::process::CommandExt;

const TUNABLES: &str = "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072";
/// Set for the re-executed daemon: whatever glibc makes of the tunables, it re-executes once.
const DONE: &str = "MCP_BROKER_HEAP_TUNED";

/// Returns at once when the tunables are set (or this is no glibc system); otherwise replaces
/// the process with itself, same pid and arguments, the tunables set. When that fails, the
/// daemon runs on with glibc's defaults.
pub(crate) fn with_returning_heap() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if std::env::var_os(DONE).is_some() || current.contains("glibc.malloc.mmap_threshold") {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let value = if current.is_empty() {
        TUNABLES.to_string()
    } else {
        format!("{current}:{TUNABLES}")
    };
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", value)
        .env(DONE, "1")
        .exec();
    eprintln!("mcp-broker: running with glibc's heap defaults (re-executing failed: {err})");
}
