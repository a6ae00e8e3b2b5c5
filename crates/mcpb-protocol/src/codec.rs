//! Newline-delimited frames with a hard size cap, and optionally a memory budget.
//!
//! A reader that buffers "until newline" lets one peer exhaust the daemon's memory with a single
//! endless line; this reader refuses a frame as soon as it grows past the cap, before buffering it.
//! Where many peers share one memory budget (a code run's SDK channel), [`FrameReader::next_line`]
//! also asks, as a line grows, whether it may be held; a line refused there is read to its end
//! without being kept, and reported with its first bytes (to answer it by its id).

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Bytes of a refused line kept to say which request it was.
const REFUSED_HEAD: usize = 64;

/// The most a reader's buffer keeps between frames: one large frame (a tool list of thousands of
/// tools) would otherwise leave every upstream's and client's reader holding its size for good.
/// Frames up to this size reuse the buffer; larger ones are rare and cost one allocation each.
/// The buffer starts empty and grows to the frames read: a daemon holds two readers per upstream
/// (its output and its stderr) and one per client, most of them reading small lines.
const BUF_KEEP: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame exceeds the {limit}-byte limit")]
    TooLarge { limit: usize },
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A line as [`FrameReader::next_line`] reads it.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A whole non-empty line, without its line ending.
    Frame(&'a [u8]),
    /// A line the budget would not hold, read to its end and dropped: its first bytes and its
    /// length.
    Refused { head: &'a [u8], bytes: usize },
    /// End of stream.
    End,
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
    /// While the budget refuses the current line: its length so far (`buf` keeps its head).
    skipping: Option<usize>,
    /// The refused line's last byte so far, and the length of its line ending once read.
    skip_last: u8,
    skip_ending: usize,
    /// The length of the last frame handed out, for `take_frame`.
    frame_len: usize,
    /// A last line without a newline at end of stream is a frame (some peers omit it); false
    /// drops it (a program that ended mid-write).
    partial_last_line: bool,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            limit,
            complete: false,
            refused_whole: false,
            skipping: None,
            skip_last: 0,
            skip_ending: 0,
            frame_len: 0,
            partial_last_line: true,
        }
    }

    /// Drops a last line that has no newline at end of stream instead of handing it out.
    pub fn whole_lines_only(mut self) -> Self {
        self.partial_last_line = false;
        self
    }

    /// Next non-empty frame without its line ending, or `None` at end of stream.
    ///
    /// A partial last line at end of stream counts as a frame: some peers omit the final newline.
    ///
    /// Cancel-safe: a caller that drops this future (e.g. in `select!`) loses nothing; the part
    /// of a line read so far stays buffered for the next call.
    pub async fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        match self.next_line(|_| true).await? {
            Line::Frame(f) => Ok(Some(f)),
            // Never refused: every line may be held.
            Line::Refused { .. } | Line::End => Ok(None),
        }
    }

    /// Next line, asking `hold` before a line grows to each new length whether it may be kept
    /// in memory. Cancel-safe like `next_frame`.
    pub async fn next_line(
        &mut self,
        mut hold: impl FnMut(usize) -> bool,
    ) -> Result<Line<'_>, FrameError> {
        loop {
            if self.complete {
                self.buf.clear();
                if self.buf.capacity() > BUF_KEEP {
                    self.buf = Vec::new();
                }
                self.skipping = None;
                self.skip_ending = 0;
                self.complete = false;
            }
            let eof = match self.fill_line(&mut hold).await {
                Ok(eof) => eof,
                Err(e) => {
                    self.complete = true;
                    return Err(e);
                }
            };
            self.complete = true;
            if eof && !self.partial_last_line {
                return Ok(Line::End);
            }
            if let Some(bytes) = self.skipping {
                // The cap holds for a refused line as for any other: over it is TooLarge.
                let bytes = bytes - self.skip_ending;
                if bytes > self.limit {
                    self.refused_whole = true;
                    return Err(FrameError::TooLarge { limit: self.limit });
                }
                return Ok(Line::Refused {
                    head: &self.buf,
                    bytes,
                });
            }
            let mut end = self.buf.len();
            while end > 0 && matches!(self.buf[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            if end == 0 {
                if eof {
                    return Ok(Line::End);
                }
                continue;
            }
            // The cap is on the frame without its line ending; the reading above allows two
            // bytes more for a CRLF, which a frame of limit + 1 bytes and a LF would slip through.
            if end > self.limit {
                self.refused_whole = true;
                return Err(FrameError::TooLarge { limit: self.limit });
            }
            self.frame_len = end;
            return Ok(Line::Frame(&self.buf[..end]));
        }
    }

    /// The frame `next_line` just handed out, as an owned buffer (no copy).
    pub fn take_frame(&mut self) -> Vec<u8> {
        let mut frame = std::mem::take(&mut self.buf);
        frame.truncate(self.frame_len);
        self.frame_len = 0;
        frame
    }

    /// Appends bytes up to and including the next newline (only the head of a line the budget
    /// refused); returns true at end of stream.
    async fn fill_line(
        &mut self,
        hold: &mut impl FnMut(usize) -> bool,
    ) -> Result<bool, FrameError> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(true);
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            let so_far = self.skipping.unwrap_or(self.buf.len());
            if so_far + take > self.limit + 2 {
                return Err(FrameError::TooLarge { limit: self.limit });
            }
            if self.skipping.is_none() && !hold(so_far + take) {
                self.skipping = Some(so_far);
                self.skip_last = self.buf.last().copied().unwrap_or(0);
                // Only the head stays, in an allocation of its own: what the budget refused
                // is not held in a buffer it no longer counts.
                self.buf = self.buf[..self.buf.len().min(REFUSED_HEAD)].to_vec();
            }
            match &mut self.skipping {
                Some(seen) => {
                    *seen += take;
                    let room = REFUSED_HEAD.saturating_sub(self.buf.len()).min(take);
                    self.buf.extend_from_slice(&available[..room]);
                    if done {
                        let before = if take >= 2 {
                            available[take - 2]
                        } else {
                            self.skip_last
                        };
                        self.skip_ending = if before == b'\r' { 2 } else { 1 };
                    }
                    self.skip_last = available[take - 1];
                }
                None => self.buf.extend_from_slice(&available[..take]),
            }
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
    async fn a_large_frame_does_not_leave_its_buffer_behind() {
        let mut input = vec![b'x'; 300 * 1024];
        input.extend_from_slice(b"\nsmall\n");
        let mut r = FrameReader::new(tokio::io::BufReader::new(&input[..]), 1 << 20);
        assert_eq!(
            r.next_frame().await.unwrap().map(<[u8]>::len),
            Some(300 * 1024)
        );
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"small"[..]));
        assert!(r.buf.capacity() <= BUF_KEEP, "{}", r.buf.capacity());
    }

    /// Frames of a usual size reuse one buffer: only a rare large one gives it back.
    #[tokio::test]
    async fn a_frame_under_the_keep_size_keeps_its_buffer() {
        let mut input = vec![b'x'; 40 * 1024];
        input.extend_from_slice(b"\nsmall\n");
        let mut r = FrameReader::new(tokio::io::BufReader::new(&input[..]), 1 << 20);
        assert_eq!(
            r.next_frame().await.unwrap().map(<[u8]>::len),
            Some(40 * 1024)
        );
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"small"[..]));
        assert!(r.buf.capacity() >= 40 * 1024, "{}", r.buf.capacity());
    }

    /// The cap counts the payload: a line ending (`\r\n` at most) comes on top, nothing more.
    #[tokio::test]
    async fn the_cap_allows_a_line_ending_and_no_more() {
        assert_eq!(
            frames(b"0123456789\r\nnext\n", 10).await[0],
            Ok(b"0123456789".to_vec())
        );
        let got = frames(b"0123456789abc\nnext\n", 10).await;
        assert_eq!(
            got,
            vec![Err("frame exceeds the 10-byte limit".to_string())]
        );
    }

    /// After a refusal the head of the line is there to log, and a new cap holds from the next
    /// frame on.
    #[tokio::test]
    async fn a_refused_line_leaves_its_head_and_the_cap_can_change() {
        let input = b"0123456789abcdef\n{\"ok\":1}\n0123456789abcdef\n";
        let mut r = FrameReader::new(tokio::io::BufReader::with_capacity(8, &input[..]), 10);
        assert!(matches!(
            r.next_frame().await,
            Err(FrameError::TooLarge { limit: 10 })
        ));
        assert!(
            r.refused_prefix().starts_with(b"01234567"),
            "{:?}",
            r.refused_prefix()
        );
        assert!(r.skip_rest_of_line().await.unwrap());
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"{\"ok\":1}"[..]));
        r.set_limit(100);
        assert_eq!(
            r.next_frame().await.unwrap(),
            Some(&b"0123456789abcdef"[..])
        );
    }

    #[tokio::test]
    async fn a_line_the_budget_refuses_is_skipped_with_its_head_and_length() {
        let mut input = b"{\"id\":7,\"v\":\"".to_vec();
        input.extend(std::iter::repeat_n(b'0', 500));
        input.extend_from_slice(b"\"}\nsmall\n");
        let mut r = FrameReader::new(tokio::io::BufReader::with_capacity(16, &input[..]), 1000);
        let mut asked = Vec::new();
        let mut hold = |n: usize| {
            asked.push(n);
            n <= 100
        };
        match r.next_line(&mut hold).await.unwrap() {
            Line::Refused { head, bytes } => {
                assert_eq!(head.len(), REFUSED_HEAD);
                assert!(head.starts_with(b"{\"id\":7,"));
                assert_eq!(
                    bytes,
                    input.len() - b"\nsmall\n".len(),
                    "without its newline"
                );
            }
            other @ Line::Frame(_) | other @ Line::End => panic!("{other:?}"),
        }
        assert_eq!(r.next_line(&mut hold).await.unwrap(), Line::Frame(b"small"));
        assert_eq!(r.take_frame(), b"small");
        assert_eq!(r.next_line(&mut hold).await.unwrap(), Line::End);
        assert!(
            asked.iter().any(|n| *n > 100),
            "asked as the line grew: {asked:?}"
        );
        assert!(
            asked.iter().all(|n| *n <= 116),
            "never asked past the refusal: {asked:?}"
        );
    }

    /// A refused line is still held to the cap, exactly: one byte over is TooLarge (a program
    /// that sends it is stopped), a CRLF line at the cap is only refused.
    #[tokio::test]
    async fn a_refused_line_is_held_to_the_cap_exactly() {
        let refuse_all = |_: usize| false;
        let mut over = vec![b'x'; 201];
        over.extend_from_slice(b"\nnext\n");
        let mut r = FrameReader::new(tokio::io::BufReader::with_capacity(16, &over[..]), 200);
        assert!(matches!(
            r.next_line(refuse_all).await,
            Err(FrameError::TooLarge { .. })
        ));
        assert!(r.skip_rest_of_line().await.unwrap(), "nothing left to skip");
        assert_eq!(
            r.next_line(|_| true).await.unwrap(),
            Line::Frame(b"next"),
            "the next line is kept"
        );
        let mut at = vec![b'x'; 200];
        at.extend_from_slice(b"\r\n");
        let mut r = FrameReader::new(tokio::io::BufReader::with_capacity(7, &at[..]), 200);
        assert!(matches!(
            r.next_line(refuse_all).await.unwrap(),
            Line::Refused { bytes: 200, .. }
        ));
    }

    #[tokio::test]
    async fn whole_lines_only_drops_a_line_cut_by_the_end_of_stream() {
        let mut r = FrameReader::new(&b"one\npartial"[..], 100).whole_lines_only();
        assert_eq!(r.next_frame().await.unwrap(), Some(&b"one"[..]));
        assert_eq!(r.next_frame().await.unwrap(), None);
        assert_eq!(
            frames(b"one\npartial", 100).await.len(),
            2,
            "kept by default"
        );
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_passes() {
        let mut line = vec![b'y'; 100];
        line.extend_from_slice(b"\r\n");
        let got = frames(&line, 100).await;
        assert_eq!(got, vec![Ok(vec![b'y'; 100])]);
    }
}
