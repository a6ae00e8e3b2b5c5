//! Size-capped rotation of logs/daemon.log. The daemon's stderr is that file (the shim opens it
//! when it starts the daemon, so even a panic lands there); past the cap the file moves to
//! daemon.log.1 (older ones shift up to .3, the oldest goes) and stderr is pointed at a fresh
//! daemon.log.

use std::fs;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A log writer that takes every secret the daemon resolved out of what it writes: the one way
/// upstream text (stderr, errors) reaches the daemon's log.
pub(crate) struct Redacting<W>(pub(crate) W);

impl<W: std::io::Write> std::io::Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !mcpb_redact::any() {
            return self.0.write(buf);
        }
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(mcpb_redact::redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// How often the log's size is checked.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Whether stderr is the file at `path` (a daemon run by hand logs to the terminal instead).
fn stderr_is(path: &Path) -> bool {
    let Ok(file) = fs::metadata(path) else {
        return false;
    };
    rustix::fs::fstat(std::io::stderr())
        .is_ok_and(|st| st.st_dev == file.dev() && st.st_ino == file.ino())
}

/// Moves `path` to `path.1` (shifting older files) when it is over `max` bytes. Returns whether
/// it rotated.
pub(crate) fn rotate_if_large(path: &Path, max: u64) -> std::io::Result<bool> {
    if fs::metadata(path).map(|m| m.len()).unwrap_or(0) <= max {
        return Ok(false);
    }
    mcpb_config::layout::rotate(path)?;
    Ok(true)
}

/// Watches the daemon's log from a thread of its own: cheap, and independent of the event loop
/// it would otherwise have to share.
pub(crate) fn watch(path: PathBuf, max: u64) {
    if !stderr_is(&path) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("log-rotate".into())
        .spawn(move || {
            // A failure (no fd left, a full disk) is retried at the next check, never the end
            // of rotation: stderr must not stay on a rotated file for good.
            let mut reopen = false;
            loop {
                std::thread::sleep(CHECK_EVERY);
                if !reopen {
                    match rotate_if_large(&path, max) {
                        Ok(false) => continue,
                        Ok(true) => reopen = true,
                        Err(e) => {
                            tracing::error!(error = %e, "cannot rotate the log; trying again");
                            continue;
                        }
                    }
                }
                let fresh = fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(&path);
                match fresh.map(|f| rustix::stdio::dup2_stderr(&f).map_err(std::io::Error::from)) {
                    Ok(Ok(())) => {
                        reopen = false;
                        tracing::info!(max_bytes = max, "log rotated");
                    }
                    Ok(Err(e)) | Err(e) => {
                        tracing::error!(error = %e, "cannot switch to a new log file; trying again");
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "log rotation is off: cannot start its thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_three_older_files_and_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("daemon.log");
        for round in 0..5u8 {
            fs::write(&log, vec![b'a' + round; 100]).unwrap();
            assert!(rotate_if_large(&log, 10).unwrap());
        }
        assert!(!log.exists());
        use mcpb_config::layout::numbered;
        assert_eq!(fs::read(numbered(&log, 1)).unwrap()[0], b'e');
        assert_eq!(fs::read(numbered(&log, 3)).unwrap()[0], b'c');
        assert!(!numbered(&log, 4).exists());
        fs::write(&log, b"small").unwrap();
        assert!(!rotate_if_large(&log, 10).unwrap());
    }
}
