//! The report pipe every process of the sandbox tree writes its events to, and the few
//! process primitives they share (fork, the path of an opened fd).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use rustix::process::Pid;

use crate::{Event, Layer, SandboxError};

/// The report pipe, shared by every process of the tree (each holds a copy after fork).
pub(crate) struct Report {
    fd: OwnedFd,
    start: Instant,
    /// The server mode reports to the server's stderr, in words: a refusal only (a layer in
    /// place is implied by the server running at all).
    text: bool,
    /// A check's trace file (`sandbox check`): refusals are said there too, on the sandbox's
    /// own channel, which the server never holds (the server's stderr is its own to write).
    trace: Option<std::fs::File>,
}

impl Report {
    pub(crate) fn new(fd: OwnedFd, start: Instant) -> Self {
        Self {
            fd,
            start,
            text: false,
            trace: None,
        }
    }

    /// A report in words on `fd` (the server's stderr, which the broker logs and keeps).
    pub(crate) fn text(fd: OwnedFd, start: Instant) -> Self {
        // Opened before any layer is applied, while the host's paths are in sight; close on
        // exec, so the server never holds it.
        let trace = std::env::var_os(crate::trace::FILE_VAR)
            .and_then(|p| std::fs::OpenOptions::new().append(true).open(p).ok());
        Self {
            fd,
            start,
            text: true,
            trace,
        }
    }

    /// One line of words, as the server mode reports.
    pub(crate) fn say(&self, line: &str) {
        let _ = rustix::io::write(&self.fd, format!("mcp-broker sandbox: {line}\n").as_bytes());
    }

    /// One JSON line. Lines stay under PIPE_BUF (reasons are cut), so each write is atomic
    /// even when two processes of the tree report at once.
    pub(crate) fn send(&self, event: &Event) {
        let mut event = event.clone();
        if let Event::Refused { reason, .. } = &mut event
            && reason.len() > 1000
        {
            let mut cut = 1000;
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
        }
        if self.text {
            if let Event::Refused { layer, reason } = &event {
                let line = format!(
                    "the {} layer could not be applied ({reason}); the server was not started",
                    layer.name()
                );
                if let Some(mut t) = self.trace.as_ref() {
                    use std::io::Write;
                    let _ = writeln!(t, "refused: {line}");
                }
                self.say(&line);
            }
            return;
        }
        if let Ok(mut line) = serde_json::to_vec(&event) {
            line.push(b'\n');
            let _ = rustix::io::write(&self.fd, &line);
        }
    }

    pub(crate) fn applied(&self, layer: Layer) {
        let us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.send(&Event::Applied { layer, us });
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

pub(crate) fn refuse(report: &Report, e: SandboxError) {
    let (layer, reason) = match e {
        SandboxError::Layer { layer, reason } => (layer, reason),
        SandboxError::Unsupported => (Layer::Spec, e.to_string()),
    };
    report.send(&Event::Refused { layer, reason });
}

/// The bind source for an fd the helper opened: the magic link resolves to the object itself.
pub(crate) fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// fork(2): `None` in the child.
pub(crate) fn fork(layer: Layer) -> Result<Option<Pid>, SandboxError> {
    // SAFETY: every process of the sandbox tree is single-threaded (`helper_main` runs before
    // the binary starts any thread, and no mode here starts one), so the child gets a
    // consistent copy of the whole process, locks and allocator included, and may go on
    // running ordinary Rust code.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(None),
        p if p < 0 => Err(SandboxError::at(layer, std::io::Error::last_os_error())),
        p => Ok(Pid::from_raw(p)),
    }
}
