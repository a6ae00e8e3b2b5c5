//! What the compact facade shares with every broker tool: input schemas generated from
//! argument structs and trimmed for a model's context, projection of results, the result
//! budget with its artifacts on disk, and "did you mean" suggestions for unknown names.
//!
//! It holds no broker tool and routes nothing: each broker tool is one unit in mcpb-daemon's
//! `tools/` (its arguments, description, `mutates`, and what it does), which uses these shapes.
//! It writes only under the artifact directory it is given.
#![forbid(unsafe_code)]

pub mod artifacts;
pub mod projection;
pub mod result;
pub mod schema;
pub mod suggest;

pub use artifacts::{ArtifactError, ArtifactStore, Page};
