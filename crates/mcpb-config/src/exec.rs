//! The code-execution part of the contract: which languages a profile may run, the limits of a
//! run, and the broker-wide ceilings no profile or run may exceed. A limit is the smallest of
//! what the run asks, what its profile sets (or the default) and the broker's ceiling.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    Javascript,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Javascript => "javascript",
        }
    }
}

/// Limits of one run; every field is optional, an absent one takes the next level's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecLimits {
    /// Whole run, start to end, in milliseconds. Default 45000.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::duration::ms"
    )]
    pub wall_clock_ms: Option<u64>,
    /// One SDK tool call, in milliseconds. Default 15000.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::duration::ms"
    )]
    pub per_call_ms: Option<u64>,
    /// SDK tool calls per run. Default 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u64>,
    /// SDK tool calls in flight at once. Default 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls: Option<u64>,
    /// stdout + stderr + result, in KiB; more is cut with a marker. Default 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_kb: Option<u64>,
    /// Address space of the program, in MiB. Default 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Processes and threads. Default 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Largest file the program may write, in KiB. Default 16384.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_kb: Option<u64>,
    /// Open files. Default 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    /// The workspace (and the run's /tmp), in KiB. Default 65536.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_kb: Option<u64>,
}

/// Limits with every value set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub wall_clock_ms: u64,
    pub per_call_ms: u64,
    pub max_calls: u64,
    pub max_concurrent_calls: u64,
    pub max_output_kb: u64,
    pub memory_mb: u64,
    pub processes: u64,
    pub file_size_kb: u64,
    pub open_files: u64,
    pub disk_kb: u64,
}

impl Limits {
    /// The defaults of the MCP Exec Broker's policy (wall clock, per call, calls, output), and
    /// the jail's own for the rest.
    pub const DEFAULT: Limits = Limits {
        wall_clock_ms: 45_000,
        per_call_ms: 15_000,
        max_calls: 8,
        max_concurrent_calls: 4,
        max_output_kb: 256,
        memory_mb: 1024,
        processes: 32,
        file_size_kb: 16_384,
        open_files: 64,
        disk_kb: 65_536,
    };

    /// The broker-wide ceilings when the config sets none.
    pub const CEILING: Limits = Limits {
        wall_clock_ms: 300_000,
        per_call_ms: 120_000,
        max_calls: 1000,
        max_concurrent_calls: 16,
        max_output_kb: 4096,
        memory_mb: 4096,
        processes: 256,
        file_size_kb: 1_048_576,
        open_files: 1024,
        disk_kb: 1_048_576,
    };

    /// The values `asked` sets above `self`'s, by name: `(key, asked, limit)`. A run may only
    /// lower its profile's limits; these are what a refusal names.
    pub fn exceeded_by(self, asked: &ExecLimits) -> Vec<(&'static str, u64, u64)> {
        [
            ("wall_clock_ms", asked.wall_clock_ms, self.wall_clock_ms),
            ("per_call_ms", asked.per_call_ms, self.per_call_ms),
            ("max_calls", asked.max_calls, self.max_calls),
            (
                "max_concurrent_calls",
                asked.max_concurrent_calls,
                self.max_concurrent_calls,
            ),
            ("max_output_kb", asked.max_output_kb, self.max_output_kb),
            ("memory_mb", asked.memory_mb, self.memory_mb),
            ("processes", asked.processes, self.processes),
            ("file_size_kb", asked.file_size_kb, self.file_size_kb),
            ("open_files", asked.open_files, self.open_files),
            ("disk_kb", asked.disk_kb, self.disk_kb),
        ]
        .into_iter()
        .filter_map(|(key, asked, limit)| Some((key, asked.filter(|a| *a > limit)?, limit)))
        .collect()
    }

    /// Each value of `self` lowered to `asked`'s where that is set (never raised).
    pub fn lowered(self, asked: &ExecLimits) -> Limits {
        each_field!(self, asked, |mine: u64, a: Option<u64>| a
            .map_or(mine, |a| a.min(mine)))
    }

    /// `set` over `self`: a set value replaces the default (the ceiling applies afterwards).
    pub fn with(self, set: &ExecLimits) -> Limits {
        each_field!(self, set, |mine: u64, s: Option<u64>| s.unwrap_or(mine))
    }

    /// The smaller of each pair of values.
    pub fn min(self, other: &Limits) -> Limits {
        each_field!(self, other, |a: u64, b: u64| a.min(b))
    }
}

/// A `Limits` whose every field is `$f($a.field, $b.field)`: the one place that lists them.
macro_rules! each_field {
    ($a:expr, $b:expr, $f:expr) => {{
        let f = $f;
        Limits {
            wall_clock_ms: f($a.wall_clock_ms, $b.wall_clock_ms),
            per_call_ms: f($a.per_call_ms, $b.per_call_ms),
            max_calls: f($a.max_calls, $b.max_calls),
            max_concurrent_calls: f($a.max_concurrent_calls, $b.max_concurrent_calls),
            max_output_kb: f($a.max_output_kb, $b.max_output_kb),
            memory_mb: f($a.memory_mb, $b.memory_mb),
            processes: f($a.processes, $b.processes),
            file_size_kb: f($a.file_size_kb, $b.file_size_kb),
            open_files: f($a.open_files, $b.open_files),
            disk_kb: f($a.disk_kb, $b.disk_kb),
        }
    }};
}
use each_field;

/// `profiles.<name>.exec`: code execution for this profile's clients.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawProfileExec {
    /// Languages this profile may run. Empty: none (code execution off).
    #[serde(default)]
    pub languages: Vec<Language>,
    /// Default limits of a run; a run may ask for lower ones, never higher.
    #[serde(default)]
    pub limits: ExecLimits,
    /// Whether a workspace opened without saying is kept after exec_close. Default false.
    #[serde(default)]
    pub persist: bool,
}

/// `broker.exec`: what holds for every profile.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBrokerExec {
    /// Ceilings no profile default or run may exceed.
    #[serde(default)]
    pub ceilings: ExecLimits,
    /// The Python interpreter for runs. Default: /usr/bin/python3, /usr/local/bin/python3,
    /// then python3 on the PATH.
    #[serde(default)]
    pub python: Option<String>,
    /// Most workspaces (open exec sessions) per profile. Default 16.
    #[serde(default)]
    pub max_workspaces: Option<u32>,
    /// Most persisted workspaces per profile, counted apart from open ones. Default 16.
    #[serde(default)]
    pub max_persisted: Option<u32>,
    /// How long a persisted workspace is kept after its last use, e.g. `7d`. Default 7 days.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::duration::ms"
    )]
    #[schemars(with = "Option<crate::duration::MsOrText>")]
    pub persist_ttl_ms: Option<u64>,
    /// Disk all persisted workspaces of one profile may use together, in MiB. Default 1024.
    #[serde(default)]
    pub persisted_disk_mb: Option<u64>,
    /// Memory all runs' SDK frames (results, call arguments) may hold in the daemon at once,
    /// in MiB; a frame past it is refused with an error to the program. Default 64.
    #[serde(default)]
    pub frame_budget_mb: Option<u64>,
    /// Code runs under way at once in the daemon, every profile together; one more is
    /// refused until one ends. Default 16.
    #[serde(default)]
    pub max_concurrent_runs: Option<u32>,
    /// Jails kept started ahead of code runs, the interpreter already loaded and confined,
    /// all profiles and languages together: a run takes one over instead of starting its own
    /// (each serves one run, then a new one is started for the next). Default 2; 0 starts
    /// every run's jail with the run.
    #[serde(default)]
    pub pool: Option<u32>,
    /// How long a started jail waits for a run before it is ended, e.g. `10m`. Default 10
    /// minutes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::duration::ms"
    )]
    #[schemars(with = "Option<crate::duration::MsOrText>")]
    pub pool_idle_ms: Option<u64>,
    /// Where code runs' workspaces live (absolute, or `~/…`). Default `state/exec` under the
    /// runtime dir. The broker makes its directories there private (0700).
    #[serde(default)]
    pub workspace_root: Option<crate::located::Located<String>>,
}

/// A profile's resolved code execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileExec {
    pub languages: Vec<Language>,
    /// The profile's defaults, already under the ceilings.
    pub limits: Limits,
    /// `exec_open` without `persist` keeps its workspace after exec_close.
    pub persist: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerExec {
    pub ceilings: Limits,
    pub python: Option<String>,
    pub max_workspaces: u32,
    pub max_persisted: u32,
    pub persist_ttl_ms: u64,
    pub persisted_disk_bytes: u64,
    pub frame_budget_bytes: u64,
    pub max_concurrent_runs: u32,
    pub pool: u32,
    pub pool_idle_ms: u64,
    /// `None`: `state/exec` under the runtime dir (`Settings::exec_root`).
    pub workspace_root: Option<std::path::PathBuf>,
}

impl Default for BrokerExec {
    fn default() -> Self {
        Self::resolve(&RawBrokerExec::default())
    }
}

impl BrokerExec {
    pub const DEFAULT_PERSIST_TTL_MS: u64 = 7 * 24 * 3600 * 1000;

    pub fn resolve(raw: &RawBrokerExec) -> Self {
        Self {
            ceilings: Limits::CEILING.with(&raw.ceilings),
            python: raw.python.clone(),
            max_workspaces: raw.max_workspaces.unwrap_or(16).max(1),
            max_persisted: raw.max_persisted.unwrap_or(16),
            persist_ttl_ms: raw.persist_ttl_ms.unwrap_or(Self::DEFAULT_PERSIST_TTL_MS),
            persisted_disk_bytes: raw
                .persisted_disk_mb
                .unwrap_or(1024)
                .saturating_mul(1 << 20),
            frame_budget_bytes: raw
                .frame_budget_mb
                .unwrap_or(64)
                .max(1)
                .saturating_mul(1 << 20),
            max_concurrent_runs: raw.max_concurrent_runs.unwrap_or(16).max(1),
            pool: raw.pool.unwrap_or(2),
            pool_idle_ms: raw.pool_idle_ms.unwrap_or(10 * 60 * 1000),
            // Set by the resolver, which knows the home `~` stands for.
            workspace_root: None,
        }
    }
}

impl ProfileExec {
    /// None when the profile enables no language.
    pub fn resolve(raw: &RawProfileExec, broker: &BrokerExec) -> Option<Self> {
        if raw.languages.is_empty() {
            return None;
        }
        let mut languages = raw.languages.clone();
        languages.dedup();
        Some(Self {
            languages,
            limits: Limits::DEFAULT.with(&raw.limits).min(&broker.ceilings),
            persist: raw.persist,
        })
    }

    pub fn allows(&self, language: Language) -> bool {
        self.languages.contains(&language)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn asked_limits_above_the_profiles_are_named() {
        let asked = ExecLimits {
            wall_clock_ms: Some(900_000),
            max_calls: Some(3),
            disk_kb: Some(Limits::DEFAULT.disk_kb + 1),
            ..ExecLimits::default()
        };
        assert_eq!(
            Limits::DEFAULT.exceeded_by(&asked),
            [
                ("wall_clock_ms", 900_000, Limits::DEFAULT.wall_clock_ms),
                (
                    "disk_kb",
                    Limits::DEFAULT.disk_kb + 1,
                    Limits::DEFAULT.disk_kb
                )
            ]
        );
        assert!(
            Limits::DEFAULT
                .exceeded_by(&ExecLimits::default())
                .is_empty()
        );
    }
    use super::*;

    #[test]
    fn a_run_may_lower_limits_and_never_raise_them() {
        let broker = BrokerExec::resolve(&RawBrokerExec {
            ceilings: ExecLimits {
                wall_clock_ms: Some(10_000),
                ..Default::default()
            },
            ..Default::default()
        });
        let profile = ProfileExec::resolve(
            &RawProfileExec {
                languages: vec![Language::Python],
                limits: ExecLimits {
                    wall_clock_ms: Some(60_000),
                    max_calls: Some(7),
                    ..Default::default()
                },
                persist: false,
            },
            &broker,
        )
        .unwrap();
        assert_eq!(profile.limits.wall_clock_ms, 10_000, "the ceiling wins");
        assert_eq!(profile.limits.max_calls, 7);
        let run = profile.limits.lowered(&ExecLimits {
            max_calls: Some(1000),
            memory_mb: Some(64),
            ..Default::default()
        });
        assert_eq!(run.max_calls, 7, "a run cannot raise");
        assert_eq!(run.memory_mb, 64, "a run can lower");
        let off = ProfileExec::resolve(&RawProfileExec::default(), &broker);
        assert!(off.is_none());
    }
}
