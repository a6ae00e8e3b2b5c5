//! The web console: pages served on loopback by the daemon that show its servers, tools, pin
//! verdicts, calls and context costs, and carry out the same actions as the CLI. It owns the
//! HTTP handling of the console (access checks, routes, the pages and their assets, which are
//! all in the binary); it asks the daemon for everything through [`Backend`] and must not keep
//! a capability of its own: an action here is a CLI command or the admin code behind one.

#![forbid(unsafe_code)]

mod access;
mod backend;
mod error;
mod pages;
pub mod pool;
mod server;

pub use access::{Access, CSRF_FIELD, Denied};
pub use backend::{Backend, Bucket, Outcome, Series, ToolRow, UpstreamAction};
pub use error::ConsoleError;
pub use server::{Started, start};
