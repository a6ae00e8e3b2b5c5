//! How an instance reaches its upstream. The instance (`instance.rs`) is the message layer:
//! request ids rewritten, pending calls, timeouts, cancellation. A [`Transport`] carries its
//! lines out and the upstream's frames in, and says when the upstream has gone. A child's stdio
//! (`stdio.rs`), streamable HTTP and legacy SSE (`remote.rs`) implement it; a new way to start
//! an upstream (a sandboxed process, say) is one more implementation, or a layer that prepares
//! the command of `StdioProcess`.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};

use crate::UpstreamError;
use crate::inbound::ReadCtx;

/// What is at the other end of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A child process, leader of its own process group.
    Process { pid: u32 },
    /// An HTTP endpoint: no process of ours.
    Remote { url: String },
}

impl Peer {
    /// The child's pid; `None` for a remote upstream.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Peer::Process { pid } => Some(*pid),
            Peer::Remote { .. } => None,
        }
    }
}

/// What an instance hands its transport when it opens it.
pub(crate) struct Channels {
    /// The lines the instance sends, in order, each ending in a newline.
    pub inbox: mpsc::Receiver<Vec<u8>>,
    /// Where the upstream's frames go (`inbound::dispatch`), with the instance's shared state:
    /// the pending calls, the alive flag, the stop signal.
    pub read: Arc<ReadCtx>,
    /// Set once with how the upstream ended; the transport sets it after its last frame, then
    /// fails what still waits (`inbound::fail_all`).
    pub exit: watch::Sender<Option<String>>,
    /// The revision the handshake settled on, for a transport that repeats it (HTTP's header).
    pub protocol_version: Arc<Mutex<String>>,
    /// Capacity the upstream holds (instance and process caps) until it has gone.
    pub permits: Vec<OwnedSemaphorePermit>,
}

/// One way to reach an upstream.
pub(crate) trait Transport: Send {
    /// Starts the tasks that carry `channels` both ways and report the end; answers what is at
    /// the other end once it can be reached. A stop (`channels.read.stop`) must end them all.
    fn open(self: Box<Self>, channels: Channels)
    -> BoxFuture<'static, Result<Peer, UpstreamError>>;
}
