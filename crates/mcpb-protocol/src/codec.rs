//! Newline-delimited frames with a hard size cap.
//!
//! A reader that buffers "until newline" lets one peer exhaust the daemon's memory with a single
//! endless line; this reader refuses a frame as soon as it grows past the cap, before buffering it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame exceeds the {limit}-byte limit")]
    TooLarge { limit: usize },
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame at a time from a buffered reader, reusing one allocation.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    limit: usize,
    /// `buf` holds a frame already handed out (or refused); clear it before reading on. While
    /// false, `buf` holds the start of a line whose end has not arrived yet.
    complete: bool,
    /// The last refused frame was read to its end already: there is nothing left to skip.
    refused_whole: bool,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        Self {
            inner,
            buf: Vec::with_capacity(8 * 1024),
            limit,
            complete: false,
            refused_whole: false,
        }
    }

    /// Next non-empty frame without its line ending, or `None` at end of stream.
    ///
    /// A partial last line at end of stream counts as a frame: some peers omit the final newline.
    ///
    /// Cancel-safe: a caller that drops this future (e.g. in `select!`) loses nothing; the part
    /// of a line read so far stays buffered for the next call.
    pub async fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        loop {
            if self.complete {
                self.buf.clear();
                self.complete = false;
            }
            let eof = match self.fill_line().await {
                Ok(eof) => eof,
                Err(e) => {
                    self.complete = true;
                    return Err(e);
                }
            };
            self.complete = true;
            let mut end = self.buf.len();
            while end > 0 && matches!(self.buf[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            if end == 0 {
                if eof {
                    return Ok(None);
                }
                continue;
            }
            // The cap is on the frame without its line ending; the reading above allows two
            // bytes more for a CRLF, which a frame of limit + 1 bytes and a LF would slip through.
            if end > self.limit {
                self.refused_whole = true;
                return Err(FrameError::TooLarge { limit: self.limit });
            }
            return Ok(Some(&self.buf[..end]));
        }
    }

    /// Appends bytes up to and including the next newline; returns true at end of stream.
    async fn fill_line(&mut self) -> Result<bool, FrameError> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(true);
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if self.buf.len() + take > self.limit + 2 {
                return Err(FrameError::TooLarge { limit: self.limit });
            }
            self.buf.extend_from_slice(&available[..take]);
            self.inner.consume(take);
            if done {
                return Ok(false);
            }
        }
    }

    /// After `TooLarge`, throws away the rest of the oversized line so reading can go on with the
    /// next frame. Returns false at end of stream.
    pub async fn skip_rest_of_line(&mut self) -> Result<bool, FrameError> {
        if std::mem::take(&mut self.refused_whole) {
            return Ok(true);
        }
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(false);
            }
            match memchr::memchr(b'\n', available) {
                Some(i) => {
                    self.inner.consume(i + 1);
                    return Ok(true);
                }
                None => {
                    let n = available.len();
                    self.inner.consume(n);
                }
            }
        }
    }

    /// After `TooLarge`, the start of the refused line (at most the cap), e.g. to log a cut copy.
    pub fn refused_prefix(&self) -> &[u8] {
        &self.buf
    }

    /// Changes the cap for the frames that follow (e.g. after a small hello line).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], limit: usize) -> Vec<Result<Vec<u8>, String>> {
        let mut r = FrameReader::new(input, limit);
        let mut out = Vec::new();
        loop {
            match r.next_frame().await {
                Ok(Some(f)) => out.push(Ok(f.to_vec())),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_skips_blank_ones() {
        let got = frames(b"{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":3}", 100).await;
        assert_eq!(
            got,
            vec![
                Ok(b"{\"a\":1}".to_vec()),
                Ok(b"{\"b\":2}".to_vec()),
                Ok(b"{\"c\":3}".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn refuses_a_line_over_the_cap_without_buffering_it() {
        let mut big = vec![b'x'; 1000];
        big.push(b'\n');
        let got = frames(&big, 100).await;
        assert_eq!(
            got,
            vec![Err("frame exceeds the 100-byte limit".to_string())]
        );
    }

    /// Found by the property test (tests/suite/props.rs): the CRLF allowance let a frame of
    /// limit + 1 bytes through; refusing it must not make the skip eat the next line.
    #[tokio::test]
    async fn a_frame_one_byte_over_the_cap_is_refused_and_the_next_line_kept() {
        let mut input = vec![0u8; 27];
        input.extend_from_slice(b"\nnext\n");
        let mut r = FrameReader::new(&input[..], 26);
        assert!(matches!(
            r.next_frame().await,
            Err(FrameError::TooLarge { .. })
        ));
        assert!(r.skip_rest_of_line().await.unwrap());
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"next"[..]));
        assert_eq!(
            frames(b"abc\r\n", 3).await,
            vec![Ok(b"abc".to_vec())],
            "a CRLF is not counted"
        );
    }

    #[tokio::test]
    async fn reading_goes_on_after_skipping_an_oversized_line() {
        let mut input = vec![b'z'; 5000];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        let mut r = FrameReader::new(&input[..], 100);
        assert!(matches!(
            r.next_frame().await,
            Err(FrameError::TooLarge { .. })
        ));
        assert!(r.skip_rest_of_line().await.unwrap());
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"{\"ok\":1}"[..]));
    }

    #[tokio::test]
    async fn a_cancelled_read_loses_no_bytes() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut r = FrameReader::new(tokio::io::BufReader::new(server), 1000);
        use tokio::io::AsyncWriteExt;
        client.write_all(b"{\"first\":").await.unwrap();
        // Give up waiting while half a line is buffered, as select! does.
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(20), r.next_frame()).await;
        assert!(cancelled.is_err());
        client.write_all(b"1}\n{\"second\":2}\n").await.unwrap();
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"{\"first\":1}"[..]));
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"{\"second\":2}"[..]));
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_passes() {
        let mut line = vec![b'y'; 100];
        line.extend_from_slice(b"\r\n");
        let got = frames(&line, 100).await;
        assert_eq!(got, vec![Ok(vec![b'y'; 100])]);
    }
}
