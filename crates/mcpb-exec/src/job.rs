//! A run's job: what the program started in the jail runs, sent over the SDK channel once the
//! run has taken the jail over and its workspace is in place. One frame, `<length>\n<JSON>`,
//! before any SDK traffic; the Python runner reads the same frame (python/runner.py).

use std::io::Read;

use serde::{Deserialize, Serialize};

/// Longest job frame: the snippet is its only large part, and a run's code is bounded far
/// below this by the daemon's frame limits.
const MAX_JOB_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Job {
    /// The snippet's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<String>,
    /// A workspace file to run instead, as a path inside the jail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) entry: Option<String>,
}

impl Job {
    /// The frame as the daemon writes it.
    pub(crate) fn frame(&self) -> Vec<u8> {
        let body = serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec());
        let mut out = format!("{}\n", body.len()).into_bytes();
        out.extend_from_slice(&body);
        out
    }

    /// Reads one frame; `Ok(None)` when the channel closed first (the jail was never taken
    /// over). Reads nothing past the frame.
    pub(crate) fn read(from: &mut impl Read) -> Result<Option<Self>, String> {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match from.read(&mut byte) {
                Ok(0) => return Ok(None),
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) if head.len() < 12 => head.push(byte[0]),
                Ok(_) => return Err("a job frame with no length".into()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("the job: {e}")),
            }
        }
        let len: usize = std::str::from_utf8(&head)
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|n| *n <= MAX_JOB_BYTES)
            .ok_or("a job frame with a bad length")?;
        let mut body = vec![0u8; len];
        match from.read_exact(&mut body) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(format!("the job: {e}")),
        }
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| format!("the job: {e}"))
    }

    /// The program's source: the snippet, or the entry file's text.
    pub(crate) fn source(&self) -> Result<String, String> {
        match (&self.entry, &self.code) {
            (Some(e), _) => std::fs::read_to_string(e).map_err(|err| format!("{e}: {err}")),
            (None, Some(c)) => Ok(c.clone()),
            (None, None) => Ok(String::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Job;

    #[test]
    fn a_frame_reads_back_and_nothing_past_it() {
        let job = Job {
            code: Some("print('é\\n')\n".into()),
            entry: None,
        };
        let mut bytes = job.frame();
        bytes.extend_from_slice(b"{\"id\":1}\n");
        let mut r = std::io::Cursor::new(bytes);
        assert_eq!(Job::read(&mut r).unwrap(), Some(job));
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut r, &mut rest).unwrap();
        assert_eq!(rest, "{\"id\":1}\n");
    }

    #[test]
    fn a_closed_channel_is_no_job_and_garbage_is_an_error() {
        assert_eq!(Job::read(&mut std::io::Cursor::new(b"")).unwrap(), None);
        assert_eq!(
            Job::read(&mut std::io::Cursor::new(b"10\n{}")).unwrap(),
            None
        );
        assert!(Job::read(&mut std::io::Cursor::new(b"x\n{}")).is_err());
        assert!(Job::read(&mut std::io::Cursor::new(b"99999999999999\n")).is_err());
    }
}
