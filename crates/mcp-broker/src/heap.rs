//! How the daemon's heap gives memory back. With glibc's defaults, the size above which an
//! allocation gets a mapping of its own rises to the largest block freed so far, so after one
//! large transient buffer (a 20,000-tool listing's 3 MB answer, a big result, a list's disk
//! copy) every later one of that size comes from the heap and stays there when freed: a
//! long-running daemon keeps its high-water mark. Fixed thresholds return such buffers to the
//! system when they are freed (measured: 20,000 tools, RSS after listing 77 -> 60 MiB,
//! docs/benchmarks.md). glibc reads them from the environment when a process starts, so
//! whatever starts the daemon sets them: the CLI's spawn and the service unit. A daemon run by
//! hand runs with glibc's defaults. Upstreams never see them (their environment is cleared).

/// The variable and the value the daemon is started with.
pub(crate) const VAR: &str = "GLIBC_TUNABLES";
const TUNABLES: &str = "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072";

/// The value for a daemon started from an environment whose own value is `current`: the
/// caller's tunables kept, ours added unless it sets the threshold itself.
pub(crate) fn tunables(current: Option<&str>) -> String {
    match current {
        Some(c) if c.contains("glibc.malloc.mmap_threshold") => c.to_string(),
        Some(c) if !c.is_empty() => format!("{c}:{TUNABLES}"),
        _ => TUNABLES.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_callers_tunables_are_kept() {
        assert_eq!(super::tunables(None), super::TUNABLES);
        assert_eq!(
            super::tunables(Some("glibc.malloc.arena_max=2")),
            format!("glibc.malloc.arena_max=2:{}", super::TUNABLES)
        );
        let own = "glibc.malloc.mmap_threshold=65536";
        assert_eq!(super::tunables(Some(own)), own);
    }
}
