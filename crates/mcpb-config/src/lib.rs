//! The configuration contract of mcp-broker: the YAML file users write (raw types that reject
//! unknown keys), its JSON Schema, the semantic checks that turn it into resolved `Settings`, the
//! embedded default, secret references, and the runtime directory layout.
//!
//! This crate reads files and the process environment it is given; it never starts processes,
//! opens sockets or resolves secret values into anything but the string handed to a child.
#![forbid(unsafe_code)]

pub mod console;
pub mod duration;
pub mod env;
pub mod error;
pub mod exec;
pub mod http;
pub mod last_good;
pub mod layout;
pub mod load;
pub mod located;
pub mod raw;
pub mod resolve;
pub mod sandbox;
pub mod schema;
pub mod settings;
pub mod template;

pub use error::{ConfigError, ConfigIssue};
pub use exec::{BrokerExec, ExecLimits, Language, Limits, ProfileExec};
pub use layout::RuntimeLayout;
pub use load::{EMBEDDED_DEFAULT, EXAMPLE, load, load_str, locate};
pub use raw::{
    Lifecycle, NameStyle, OAuthGrant, PinModeSetting, SearchModel, StartMode, Transport, Vocabulary,
};
pub use resolve::ResolveContext;
pub use settings::{
    AuditSettings, BrokerSettings, ConfigSource, DEFAULT_IDLE_TIMEOUT, NameFilter, ProfileSettings,
    Settings, SmokeSettings, ToolFilter, UpstreamSettings,
};
pub use template::Template;

/// Seconds since the Unix epoch, for the times the broker records (0 if the clock is before it).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
