//! A run's stdout and stderr under one cap: each stream keeps at most the whole budget while
//! the run goes (the rest is read and dropped, so a flood never blocks the program), and at the
//! end both are cut to share what the result left, with a marker saying how much went.

pub(crate) struct Output {
    cap: usize,
    kept: Vec<u8>,
    produced: usize,
}

impl Output {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            kept: Vec::new(),
            produced: 0,
        }
    }

    pub(crate) fn take(&mut self, n: Option<usize>, buf: &[u8]) {
        let Some(n) = n else {
            return;
        };
        self.produced += n;
        let room = self.cap.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&buf[..n.min(room)]);
    }

    pub(crate) fn produced(&self) -> usize {
        self.produced
    }

    fn text(&self, keep: usize) -> String {
        let mut t = String::from_utf8_lossy(&self.kept[..keep.min(self.kept.len())]).into_owned();
        if self.produced > keep {
            t.push_str(&format!(
                "\n[... {} bytes cut: over max_output_kb]",
                self.produced - keep
            ));
        }
        t
    }

    /// Both streams within `left` bytes: stderr (where failures are explained) keeps up to
    /// half, stdout the rest. True when anything was cut.
    pub(crate) fn fit(stdout: Output, stderr: Output, left: usize) -> (String, String, bool) {
        let err_keep = stderr.produced.min(left / 2);
        let out_keep = stdout.produced.min(left - err_keep);
        let err_keep = stderr.produced.min(left - out_keep);
        let cut = stdout.produced > out_keep || stderr.produced > err_keep;
        (stdout.text(out_keep), stderr.text(err_keep), cut)
    }
}

#[cfg(test)]
mod tests {
    use super::Output;

    #[test]
    fn streams_share_what_is_left_and_say_what_was_cut() {
        let mut out = Output::new(10);
        out.take(Some(8), b"abcdefgh");
        out.take(Some(8), b"ijklmnop");
        let mut err = Output::new(10);
        err.take(Some(2), b"E!");
        let (o, e, cut) = Output::fit(out, err, 8);
        assert!(cut);
        assert_eq!(e, "E!");
        assert_eq!(o, "abcdef\n[... 10 bytes cut: over max_output_kb]");
    }
}
