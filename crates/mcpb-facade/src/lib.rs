//! The compact facade a profile shows instead of raw tools: the contract of each broker tool
//! (arguments, limits, schema, description; one module per tool under `tools/`),
//! projection of results, the result budget with its artifacts on disk, and "did you mean"
//! suggestions for unknown names.
//!
//! It does not route calls or decide policy: the daemon finds the tools a profile may see and
//! calls upstreams; this crate shapes what goes in and out. It writes only under the artifact
//! directory it is given.
#![forbid(unsafe_code)]

pub mod artifacts;
pub mod projection;
pub mod result;
pub mod suggest;
pub mod tools;

pub use artifacts::{ArtifactError, ArtifactStore, Page};
pub use tools::{FacadeTool, definitions};
