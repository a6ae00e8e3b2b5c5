//! The way back from an upstream to the client session that caused a message: progress,
//! server-to-client requests (sampling, elicitation, roots) and their answers. The daemon
//! implements `ClientLink` for each session; this crate only calls it.

use mcpb_protocol::RpcCode;
use mcpb_protocol::message::{error_line, raw_error_line, response_line};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

pub trait ClientLink: Send + Sync {
    /// Identifies the session, to tell whether several calls come from the same one.
    fn session_id(&self) -> u64;
    /// Delivers a complete frame (a notification) to the client; never blocks, may drop.
    fn notify(&self, line: Vec<u8>);
    /// Sends a server-to-client request to the client; its answer, or a refusal, goes through
    /// `reply`.
    fn forward_request(&self, method: &str, params: Option<&RawValue>, reply: Responder);
}

/// Answers one request an upstream sent to the client. Dropped unanswered (the client went
/// away), it tells the upstream so instead of leaving it waiting.
pub struct Responder {
    outbox: mpsc::Sender<Vec<u8>>,
    id: Box<RawValue>,
    sent: bool,
}

impl Responder {
    /// A responder writing its answer, as a frame, into `outbox` (an instance's queue to its
    /// upstream).
    pub fn new(outbox: mpsc::Sender<Vec<u8>>, id: Box<RawValue>) -> Self {
        Self {
            outbox,
            id,
            sent: false,
        }
    }

    fn send(&mut self, line: Vec<u8>) {
        self.sent = true;
        if self.outbox.try_send(line).is_err() {
            tracing::warn!(
                "could not pass a client answer to its upstream (queue full or upstream gone)"
            );
        }
    }

    pub fn result(mut self, result: &RawValue) {
        let line = response_line(&self.id, result);
        self.send(line);
    }

    pub fn error(mut self, error: &RawValue) {
        let line = raw_error_line(&self.id, error);
        self.send(line);
    }

    pub fn refuse(mut self, code: RpcCode, message: &str) {
        let line = error_line(Some(&self.id), code, message);
        self.send(line);
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.sent {
            let line = error_line(
                Some(&self.id),
                RpcCode::InternalError,
                "the client session ended before answering",
            );
            let _ = self.outbox.try_send(line);
        }
    }
}
