//! The tool catalog: what is known about each upstream tool (its definition, split into the
//! fields people and models search by) and a BM25F search index over them.
//!
//! This crate is pure computation: it reads no files, starts nothing and knows nothing of
//! sessions or policy; callers decide which tools go in and who may see the results.
#![forbid(unsafe_code)]

pub mod doc;
pub mod search;
pub mod text;

pub use doc::ToolDoc;
pub use search::{Hit, Index, Weights};
