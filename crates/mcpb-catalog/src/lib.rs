//! The tool catalog: exposed names, each upstream's tool list cached on disk, the search index
//! over tool definitions, pins of approved definitions and the scan of their descriptions.
//!
//! It reads and writes only the files it is given (the catalog directory and the pin store);
//! it starts nothing and knows nothing of sessions or profiles: callers decide which tools go in
//! and who may see the results.
#![forbid(unsafe_code)]

pub mod canonical;
pub mod doc;
pub mod embed;
mod error;
mod invisible;
#[cfg(feature = "semantic-minilm")]
pub mod minilm;
pub mod names;
pub mod pins;
pub mod scan;
pub mod search;
pub mod store;
pub mod text;
pub mod vectors;

pub use doc::ToolDoc;
pub use error::CatalogError;
pub use pins::{Judged, PinMode, Pins, Quarantine, Verdict};
pub use scan::{Finding, Severity};
pub use search::{Hit, Index, Weights};
pub use store::{CachedContent, CachedList, ListStore};
pub use vectors::VectorCache;
