//! A session's queue of frames to its client, bounded by count and by bytes. A client that
//! stops reading fills it; senders of answers then wait (up to `broker.client_write_timeout_ms`,
//! after which the client is disconnected) and advisory frames (progress) are dropped, so one
//! slow reader can pin neither the daemon's memory nor another session's work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

const DEPTH: usize = 1024;

pub(crate) struct ClientQueue {
    /// Taken at `close`, so the writer sees the end of the queue although it holds the queue
    /// for its accounting.
    tx: parking_lot::Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// Bytes sent into the queue and not yet written to the client.
    queued: AtomicUsize,
    max_bytes: usize,
    room: Notify,
    /// Senders waiting for room, so the writer wakes them only when there are any.
    waiting: AtomicUsize,
    /// Woken when the client cannot take answers any more: the session ends.
    pub(crate) gone: Arc<Notify>,
    pub(crate) abandoned: AtomicBool,
    timeout: Duration,
    /// Where large answers wait for a slow reader; `None` keeps them in memory.
    spill_dir: Option<std::path::PathBuf>,
    /// Bytes of this session's answers waiting on disk now.
    spilled: AtomicUsize,
}

/// Names spill files uniquely across every session of the daemon.
static SPILL_SEQ: AtomicUsize = AtomicUsize::new(0);

/// Answers smaller than this wait in memory.
const SPILL_MIN: usize = 64 * 1024;
/// Disk one session's waiting answers may take: enough for every running request's answer at
/// the default frame cap (64 x 16 MiB); past it they wait in memory.
const SPILL_BUDGET: usize = 1024 * 1024 * 1024;

/// Writes `line` to a file of its own under `dir` and unlinks it at once: the open handle is
/// all that is left, and nothing stays behind whatever happens to the daemon.
fn spill(dir: &std::path::Path, n: usize, line: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(format!(
        "answer-{}-{n}-{}.spill",
        std::process::id(),
        line.len()
    ));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    file.write_all(line)?;
    file.rewind()?;
    Ok(file)
}

/// An answer kept on disk; its bytes leave the session's spill count however it ends.
struct SpillFile<'a> {
    file: std::fs::File,
    len: usize,
    counter: &'a AtomicUsize,
}

impl Drop for SpillFile<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.len, Ordering::SeqCst);
    }
}

/// An answer waiting for room in the queue.
enum Held<'a> {
    Memory(Vec<u8>),
    Disk(SpillFile<'a>),
    /// The spill task failed outright; the answer is gone and so is the session.
    Lost,
}

impl Held<'_> {
    async fn take(self) -> Option<Vec<u8>> {
        match self {
            Held::Memory(line) => Some(line),
            Held::Disk(spilled) => {
                let len = spilled.len;
                let file = spilled.file.try_clone().ok()?;
                let read = tokio::task::spawn_blocking(move || {
                    let mut file = file;
                    let mut buf = Vec::with_capacity(len);
                    std::io::Read::read_to_end(&mut file, &mut buf).map(|_| buf)
                })
                .await;
                drop(spilled);
                match read {
                    Ok(Ok(buf)) if buf.len() == len => Some(buf),
                    _ => {
                        tracing::error!(
                            "an answer kept on disk for a slow client could not be read back; closing the session"
                        );
                        None
                    }
                }
            }
            Held::Lost => None,
        }
    }
}

impl ClientQueue {
    pub(crate) fn new(
        max_bytes: usize,
        timeout: Duration,
        spill_dir: Option<std::path::PathBuf>,
    ) -> (Arc<Self>, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(DEPTH);
        let q = Arc::new(Self {
            tx: parking_lot::Mutex::new(Some(tx)),
            queued: AtomicUsize::new(0),
            max_bytes,
            room: Notify::new(),
            waiting: AtomicUsize::new(0),
            gone: Arc::new(Notify::new()),
            abandoned: AtomicBool::new(false),
            timeout,
            spill_dir,
            spilled: AtomicUsize::new(0),
        });
        (q, rx)
    }

    /// Room for `len` more bytes? A frame larger than the whole budget goes alone into an
    /// empty queue.
    fn fits(&self, len: usize) -> bool {
        let queued = self.queued.load(Ordering::SeqCst);
        queued == 0 || queued.saturating_add(len) <= self.max_bytes
    }

    /// Queues an advisory frame if there is room now; false when it was dropped.
    pub(crate) fn try_push(&self, line: Vec<u8>) -> bool {
        let len = line.len();
        if !self.fits(len) {
            return false;
        }
        self.queued.fetch_add(len, Ordering::SeqCst);
        let sent = self.sender().is_some_and(|tx| tx.try_send(line).is_ok());
        if !sent {
            self.written(len);
        }
        sent
    }

    fn sender(&self) -> Option<mpsc::Sender<Vec<u8>>> {
        self.tx.lock().clone()
    }

    /// No more frames: the writer drains what is queued, then ends.
    pub(crate) fn close(&self) {
        self.tx.lock().take();
    }

    /// Queues an answer, waiting for room up to the write timeout; past it the client is
    /// treated as gone.
    pub(crate) async fn push(&self, line: Vec<u8>) {
        let len = line.len();
        // The common case needs no timer: there is room now.
        let line = if self.fits(len) {
            self.queued.fetch_add(len, Ordering::SeqCst);
            match self.sender().map(|tx| tx.try_send(line)) {
                Some(Ok(())) => return,
                Some(Err(mpsc::error::TrySendError::Full(line))) => {
                    self.queued.fetch_sub(len, Ordering::SeqCst);
                    line
                }
                Some(Err(mpsc::error::TrySendError::Closed(_))) | None => {
                    self.written(len);
                    return;
                }
            }
        } else {
            line
        };
        let _waiting = Waiting::new(&self.waiting);
        // An answer that has to wait for a slow reader waits on disk when it is large, so the
        // answers of many running requests cannot pin memory between them.
        let held = self.hold(line).await;
        let wait = async {
            loop {
                let room = self.room.notified();
                if self.fits(len) {
                    break;
                }
                room.await;
            }
            let Some(line) = held.take().await else {
                self.gone.notify_one();
                return;
            };
            self.queued.fetch_add(len, Ordering::SeqCst);
            let sent = match self.sender() {
                Some(tx) => tx.send(line).await.is_ok(),
                None => false,
            };
            if !sent {
                self.written(len);
            }
        };
        if tokio::time::timeout(self.timeout, wait).await.is_err() {
            if !self.abandoned.swap(true, Ordering::SeqCst) {
                tracing::warn!(
                    waited_ms = self.timeout.as_millis(),
                    queued_bytes = self.queued.load(Ordering::SeqCst),
                    "client is not reading its answers; disconnecting it"
                );
            }
            self.gone.notify_one();
        }
    }

    /// Keeps a waiting answer: in memory when small or when it cannot be written out, else in
    /// an unlinked file under the spill directory (within the session's spill budget).
    async fn hold(&self, line: Vec<u8>) -> Held<'_> {
        let Some(dir) = self.spill_dir.clone() else {
            return Held::Memory(line);
        };
        let len = line.len();
        if len < SPILL_MIN || self.spilled.load(Ordering::SeqCst) + len > SPILL_BUDGET {
            return Held::Memory(line);
        }
        let n = SPILL_SEQ.fetch_add(1, Ordering::SeqCst);
        let written =
            tokio::task::spawn_blocking(move || spill(&dir, n, &line).map_err(|_| line)).await;
        match written {
            Ok(Ok(file)) => {
                self.spilled.fetch_add(len, Ordering::SeqCst);
                Held::Disk(SpillFile {
                    file,
                    len,
                    counter: &self.spilled,
                })
            }
            Ok(Err(line)) => Held::Memory(line),
            Err(_) => Held::Lost,
        }
    }

    /// Under the byte budget: the session may take another request from its client.
    pub(crate) fn has_room(&self) -> bool {
        self.queued.load(Ordering::SeqCst) < self.max_bytes
    }

    /// Resolves once the queue is under its byte budget.
    pub(crate) async fn until_room(&self) {
        let _waiting = Waiting::new(&self.waiting);
        loop {
            let room = self.room.notified();
            if self.has_room() {
                return;
            }
            room.await;
        }
    }

    /// The writer wrote (or dropped) a frame of `len` bytes.
    pub(crate) fn written(&self, len: usize) {
        self.queued.fetch_sub(len, Ordering::SeqCst);
        // Waking is a lock on the waiter list: only when someone waits for room.
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.room.notify_waiters();
        }
    }

    #[cfg(test)]
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }
}

/// Counts one waiter for as long as it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_queue_is_bounded_by_bytes_and_a_stuck_client_is_let_go() {
        let (q, mut rx) = ClientQueue::new(1000, Duration::from_secs(10), None);
        q.push(vec![b'a'; 600]).await;
        assert!(
            !q.try_push(vec![b'p'; 600]),
            "advisory frames are dropped when full"
        );
        assert!(q.try_push(vec![b'p'; 100]));
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.push(vec![b'b'; 600]).await })
        };
        tokio::task::yield_now().await;
        assert_eq!(q.queued_bytes(), 700, "the second answer waits for room");
        let first = rx.recv().await.unwrap();
        q.written(first.len());
        waiter.await.unwrap();
        assert_eq!(q.queued_bytes(), 700);
        // Nobody reads any more: the next answer gives up after the timeout.
        q.push(vec![b'c'; 600]).await;
        assert!(q.abandoned.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn large_answers_waiting_for_room_wait_on_disk_and_come_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (q, mut rx) =
            ClientQueue::new(100 * 1024, Duration::from_secs(10), Some(dir.path().into()));
        q.push(vec![b'a'; 90 * 1024]).await;
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.push(vec![b'b'; 80 * 1024]).await })
        };
        assert!(
            wait(|| q.spilled.load(Ordering::SeqCst) == 80 * 1024).await,
            "the waiting answer went to disk"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "unlinked at once"
        );
        let first = rx.recv().await.unwrap();
        q.written(first.len());
        waiter.await.unwrap();
        let second = rx.recv().await.unwrap();
        assert_eq!(second, vec![b'b'; 80 * 1024]);
        assert_eq!(q.spilled.load(Ordering::SeqCst), 0);
    }

    async fn wait(mut f: impl FnMut() -> bool) -> bool {
        for _ in 0..200 {
            if f() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        f()
    }

    #[tokio::test]
    async fn a_frame_over_the_whole_budget_still_goes_alone() {
        let (q, mut rx) = ClientQueue::new(10, Duration::from_secs(1), None);
        q.push(vec![b'x'; 100]).await;
        assert_eq!(rx.recv().await.unwrap().len(), 100);
    }
}
