//! Coverage builds only (`--cfg tarpaulin`, set by scripts/coverage): the broker's own
//! processes start with a cleared environment, so the directory the coverage run collects
//! profiles in is handed on to each of them by the process that starts it. In every other build
//! [`profile_env`] is empty and nothing here reads the environment.
//!
//! A started process writes its counters in continuous mode (`%c`: the counters are a shared
//! mapping of the profile file), so the forked holder and init of a jail, which never write a
//! profile of their own, still count, and a profile read while its process runs is whole.

#![forbid(unsafe_code)]

use std::ffi::OsString;

/// The directory a coverage run collects the broker processes' profiles in.
pub use crate::env::COVERAGE_PROFILE_DIR as PROFILE_DIR_VAR;
/// The LLVM profile runtime's own variable.
pub const PROFILE_FILE_VAR: &str = "LLVM_PROFILE_FILE";

/// The variables to give a process of the broker's own binary that starts with a cleared
/// environment: empty unless this is a coverage build run by the coverage script.
pub fn profile_env() -> Vec<(&'static str, OsString)> {
    #[cfg(tarpaulin)]
    if let Some(dir) = std::env::var_os(PROFILE_DIR_VAR) {
        // pid_max is small (32768 here): a pid comes back within one run, and a profile file
        // opened again is truncated under whoever still maps it. The start time keeps names apart.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut file = dir.clone();
        file.push(format!("/spawned-{nanos}-%p%c.profraw"));
        return vec![(PROFILE_DIR_VAR, dir), (PROFILE_FILE_VAR, file)];
    }
    Vec::new()
}

/// The variables [`profile_env`] adds, which a program that is not the broker's must not see.
pub const VARS: [&str; 2] = [PROFILE_DIR_VAR, PROFILE_FILE_VAR];
