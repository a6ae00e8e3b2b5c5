//! Wire-level handling shared by every part of the broker: newline-delimited JSON-RPC framing with a
//! frame-size cap, borrowed message views that keep payloads as raw JSON (so nothing the broker does
//! not understand is lost), MCP protocol revisions and the two eras of the wire (`era`), the broker's own hello line, and the single
//! mapping from broker failures to JSON-RPC errors; and the compact form every part holds a tool
//! definition in (`tool`).
//!
//! This crate performs no I/O of its own beyond reading frames from a reader it is handed; it knows
//! nothing of sockets, processes, configuration or policy.
#![forbid(unsafe_code)]

pub mod codec;
pub mod era;
pub mod error;
pub mod hello;
pub mod json;
pub mod message;
pub mod revision;
pub mod rewrite;
pub mod scan;
pub mod tool;

pub use codec::{FrameError, FrameReader, Line};
pub use era::Era;
pub use error::BrokerRpcError;
pub use hello::{
    AdminCommand, BROKER_PROTOCOL_VERSION, CHECK_CLIENT, Hello, HelloKind, HelloReply,
};
pub use message::RpcCode;
pub use message::{Incoming, IncomingKind, MessageError};
pub use tool::{NotATool, Tool};
