//! One run: a started jail taken over (one of the pool, else one started for the run), its
//! workspace handed over and its job sent; then one loop that serves SDK frames, captures
//! output under its cap, watches the deadline and waits for the helper. The deadline kills the
//! helper's whole process group, and with it the jail (each process of the tree dies with its
//! parent).

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use mcpb_config::{Language, Limits};
use mcpb_sandbox::{Event, JailLimits, JailSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::answer::RunAnswer;
use crate::conclude::{Concluded, Ran, conclude};
use crate::job::Job;
use crate::output::Output;
use crate::pool::{Pool, Started, Starter};
use crate::python::{self, Python};
use crate::sdk::{self, Calls, Step, ToolHost};
use crate::workspace::{Lease, confined};

/// Answer bytes that may wait for the program before its frames stop being read.
const MAX_QUEUED: usize = 8 << 20;

/// What to run.
pub struct RunRequest {
    pub language: Language,
    pub code: Option<String>,
    /// A workspace file to run instead of `code`.
    pub entry: Option<String>,
    /// Globs over the exposed names of the tools the run may call.
    pub allow: Vec<String>,
    pub read_only: bool,
    pub limits: Limits,
}

/// Starts runs. One per daemon; cheap to share.
pub struct Runner {
    /// Runs at once in this daemon, whatever their profile: each holds a helper, a jail and
    /// its frames.
    running: std::sync::Arc<tokio::sync::Semaphore>,
    max_running: usize,
    python: Result<Python, String>,
    frames: sdk::FrameBudget,
    starter: Arc<Starter>,
    pool: Pool,
}

impl Runner {
    /// `helper` is the broker's own binary (its `__sandbox` mode); `frame_budget` the bytes all
    /// runs' SDK frames may hold in the daemon at once.
    pub fn new(helper: PathBuf, python: Option<&str>, frame_budget: usize) -> Self {
        Self::with_max_running(helper, python, frame_budget, 16)
    }

    /// As `new`, with at most `max_running` runs at once in the daemon.
    pub fn with_max_running(
        helper: PathBuf,
        python: Option<&str>,
        frame_budget: usize,
        max_running: usize,
    ) -> Self {
        let max_running = max_running.max(1);
        let starter = Arc::new(Starter {
            helper,
            cgroups: run_cgroups(),
        });
        Self {
            running: Arc::new(tokio::sync::Semaphore::new(max_running)),
            max_running,
            python: python::find(python),
            frames: sdk::FrameBudget::new(frame_budget),
            pool: Pool::new(starter.clone(), 0, Duration::ZERO),
            starter,
        }
    }

    /// Keeps up to `size` jails started ahead of their runs (0: none), each ended after
    /// `idle` without a run. A jail of a spec is started after a run of that spec, so the
    /// first run of a profile and language starts its own.
    pub fn with_pool(mut self, size: usize, idle: Duration) -> Self {
        self.pool = Pool::new(self.starter.clone(), size, idle);
        self
    }

    /// Ends the jails waiting in the pool (the daemon is stopping).
    pub async fn clear_pool(&self) {
        self.pool.clear().await;
    }

    /// What is left of the frame budget (for tests and status).
    pub fn frame_budget_left(&self) -> usize {
        self.frames.available()
    }

    pub async fn run(&self, req: &RunRequest, lease: &Lease, host: &dyn ToolHost) -> Ran {
        let refused = |reason: String| Ran {
            answer: RunAnswer::refused(reason),
            keep_workspace: false,
        };
        if !cfg!(target_os = "linux") {
            return refused(
                "Python runs need the Linux sandbox; this system has none\nhint: run JavaScript instead".into(),
            );
        }
        let Ok(_running) = self.running.clone().try_acquire_owned() else {
            return refused(format!(
                "{} runs are under way in the broker already (broker.exec.max_concurrent_runs)\nhint: try again when one has ended",
                self.max_running
            ));
        };
        let allow = match req
            .allow
            .iter()
            .map(|p| glob::Pattern::new(p).map_err(|e| format!("allow pattern {p:?}: {e}")))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(a) => a,
            Err(e) => return refused(e),
        };
        let (spec, job) = match self.spec(req, lease) {
            Ok(s) => s,
            Err(e) => return refused(e),
        };
        let calls = Calls {
            allow,
            read_only: req.read_only,
            max_calls: req.limits.max_calls,
            max_concurrent: req.limits.max_concurrent_calls.max(1),
            per_call: Duration::from_millis(req.limits.per_call_ms),
            made: 0,
            in_flight: 0,
            limit_hit: None,
            result: None,
            artifacts: Vec::new(),
            // A run's artifacts share the profile's store with every session's large results.
            artifact_bytes_left: 16 << 20,
            records: Vec::new(),
            unlisted: 0,
            refused: 0,
        };
        let key = pool_key(&spec, lease.run_uid().is_some());
        let mut ran = match self
            .supervise(&spec, &job, &key, lease, req, calls, host)
            .await
        {
            Ok(ran) => ran,
            Err(e) => refused(e),
        };
        ran.answer.usage.uid = lease.run_uid();
        // The next run of this kind takes over a jail started now. A root daemon gives that
        // jail host ids of its own, as every run has.
        match lease.run_uid() {
            None => self.pool.refill(key, spec, None),
            Some(_) => {
                if let Some(ids) = lease.reserve_run_ids() {
                    let mut next = spec;
                    (next.host_uid, next.host_gid) = ids.ids();
                    self.pool.refill(key, next, Some(ids));
                }
            }
        }
        ran
    }

    fn spec(&self, req: &RunRequest, lease: &Lease) -> Result<(JailSpec, Job), String> {
        let owner = lease.ids();
        let entry = req
            .entry
            .as_deref()
            .map(confined)
            .transpose()
            .map_err(|e| e.to_string())?;
        if req.code.is_none() && entry.is_none() {
            return Err("a run needs code or entry".into());
        }
        let mut env: Vec<(String, String)> = Vec::new();
        let mut in_process = false;
        let job = Job {
            code: if entry.is_some() {
                None
            } else {
                req.code.clone()
            },
            entry: entry.map(|e| format!("{}/{}", mcpb_sandbox::JAIL_WORK, e.display())),
        };
        let (argv, files, read_only) = match req.language {
            Language::Python => {
                let py = self.python.as_ref().map_err(Clone::clone)?;
                let (argv, files) = python::program(py);
                env.push(("PYTHONIOENCODING".into(), "utf-8".into()));
                (argv, files, py.prefix.iter().cloned().collect::<Vec<_>>())
            }
            Language::Javascript => {
                let (argv, files) = (crate::js::program(), Vec::new());
                let memory = req.limits.memory_mb.saturating_sub(64).max(16) << 20;
                env.push(("MCP_JS_MEMORY_BYTES".into(), memory.to_string()));
                env.push((
                    "MCP_JS_DEADLINE_MS".into(),
                    req.limits.wall_clock_ms.to_string(),
                ));
                in_process = true;
                (argv, files, Vec::new())
            }
        };
        let l = &req.limits;
        let spec = JailSpec {
            read_only,
            in_process,
            files,
            argv,
            env: [
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
                ("HOME", mcpb_sandbox::JAIL_WORK),
                ("TMPDIR", "/tmp"),
                ("LANG", "C.UTF-8"),
                ("MCP_SDK_FD", "3"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(env)
            .collect(),
            limits: JailLimits {
                memory_bytes: l.memory_mb.saturating_mul(1 << 20),
                processes: l.processes,
                file_size_bytes: l.file_size_kb.saturating_mul(1024),
                open_files: l.open_files,
                cpu_seconds: l.wall_clock_ms.div_ceil(1000) + 1,
                disk_bytes: l.disk_kb.saturating_mul(1024),
            },
            host_uid: owner.0,
            host_gid: owner.1,
            cgroup: None,
        };
        Ok((spec, job))
    }

    #[allow(clippy::too_many_arguments)]
    async fn supervise(
        &self,
        spec: &JailSpec,
        job: &Job,
        key: &JailSpec,
        lease: &Lease,
        req: &RunRequest,
        mut calls: Calls,
        host: &dyn ToolHost,
    ) -> Result<Ran, String> {
        let start = Instant::now();
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(req.limits.wall_clock_ms);
        let (started, handed) = self.jail(spec, key, lease, deadline).await?;
        let Started {
            mut child,
            sdk: ours,
            report: report_r,
            control,
            cgroup,
            run_ids: _,
        } = started;
        let group = child.id();
        let kill = || {
            if let Some(pid) = group.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        };
        let budget =
            usize::try_from(req.limits.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX);
        let mut stdout = Output::new(budget);
        let mut stderr = Output::new(budget);
        let (mut out_pipe, mut err_pipe) = (child.stdout.take(), child.stderr.take());
        let (read_half, mut write_half) = ours.into_split();
        let reader = tokio::io::BufReader::new(read_half);
        let mut frames = sdk::FrameReader::new(reader, sdk::MAX_FRAME_BYTES, &self.frames);
        // Answers wait here for a program that reads them; while more than MAX_QUEUED bytes
        // wait, no further frame is read (a program that never reads cannot grow the daemon).
        let queued = std::sync::atomic::AtomicUsize::new(0);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let send = |line: Vec<u8>| {
            queued.fetch_add(line.len(), std::sync::atomic::Ordering::Relaxed);
            let _ = tx.send(line);
        };
        let writer = async {
            while let Some(line) = rx.recv().await {
                if write_half.write_all(&line).await.is_err() {
                    break;
                }
                queued.fetch_sub(line.len(), std::sync::atomic::Ordering::Relaxed);
            }
        };
        tokio::pin!(writer);
        let mut pending = FuturesUnordered::new();
        let deadline = tokio::time::sleep_until(deadline);
        tokio::pin!(deadline);
        let (mut timed_out, mut abuse) = (false, None::<String>);
        let (mut sdk_open, mut writer_done) = (true, false);
        let mut obuf = vec![0u8; 64 * 1024];
        let mut ebuf = vec![0u8; 64 * 1024];
        let mut exited = false;
        match handed {
            // The program waits for its job before anything else on the channel.
            Handed::Ready => send(job.frame()),
            // Init refused the workspace (its report says why) and is ending the jail.
            Handed::Failed => {}
            Handed::TimedOut => {
                timed_out = true;
                kill();
                exited = true;
            }
        }
        while !exited {
            tokio::select! {
                () = &mut deadline => {
                    timed_out = true;
                    kill();
                    break;
                }
                frame = frames.next(),
                    if sdk_open && queued.load(std::sync::atomic::Ordering::Relaxed) < MAX_QUEUED => {
                    match self.step(frame, &mut calls, host) {
                        Some(Step::Answer(line)) => send(line),
                        Some(Step::Call(fut)) => pending.push(fut),
                        Some(Step::Abuse(why)) => {
                            abuse = Some(why);
                            kill();
                            break;
                        }
                        None => sdk_open = false,
                    }
                }
                Some((line, record)) = pending.next(), if !pending.is_empty() => {
                    calls.in_flight = calls.in_flight.saturating_sub(1);
                    calls.record(record);
                    send(line);
                }
                () = &mut writer, if !writer_done => writer_done = true,
                n = read_some(&mut out_pipe, &mut obuf) => stdout.take(n, &obuf),
                n = read_some(&mut err_pipe, &mut ebuf) => stderr.take(n, &ebuf),
                _ = child.wait() => exited = true,
            }
        }
        if !exited || timed_out {
            let _ = child.wait().await;
        }
        drop(control);
        // What is still in the pipes after the tree is gone.
        drain(out_pipe, &mut stdout, &mut obuf).await;
        drain(err_pipe, &mut stderr, &mut ebuf).await;
        let ran = self
            .finish(
                report_r,
                cgroup.get(),
                (start, &lease.out()),
                Concluded {
                    events: Vec::new(),
                    timed_out,
                    abuse,
                    calls,
                    stdout,
                    stderr,
                    wall_ms: 0,
                    limits: req.limits,
                },
            )
            .await
            .map_err(|e| format!("supervision: {e}"));
        let dir = cgroup.get().map(|c| c.dir().display().to_string());
        if !cgroup.remove().await {
            tracing::warn!(cgroup = ?dir, "a run's memory cgroup could not be removed");
        }
        ran
    }

    /// A jail for this run with the run's workspace in it: a ready one of the pool under
    /// `key`, else (or when the ready one fails its take-over) one started now for `spec`.
    async fn jail(
        &self,
        spec: &JailSpec,
        key: &JailSpec,
        lease: &Lease,
        deadline: tokio::time::Instant,
    ) -> Result<(Started, Handed), String> {
        let opened = |p: PathBuf| crate::pool::open_dir(&p).map_err(|e| format!("workspace: {e}"));
        let (work, out) = (opened(lease.work())?, opened(lease.out())?);
        let mut ready = self.pool.take(key);
        loop {
            // A root daemon's ready jail brings its own ids; the lease's go back only once
            // the take-over is done.
            let mut previous = None;
            let (mut started, was_ready) = match ready.take() {
                Some(mut s) => {
                    if let Some(ids) = s.run_ids.take() {
                        match lease.adopt(ids) {
                            Ok(p) => previous = p,
                            Err((e, ids)) => {
                                tracing::debug!("a ready jail's ids could not be adopted: {e}");
                                s.run_ids = Some(ids);
                                tokio::spawn(crate::pool::discard(s));
                                continue;
                            }
                        }
                    }
                    (s, true)
                }
                None => {
                    let mut spec = spec.clone();
                    (spec.host_uid, spec.host_gid) = lease.ids();
                    (self.starter.start(&spec, None).await?, false)
                }
            };
            let handed = match crate::pool::hand_over(&started.control, &work, &out) {
                Err(_) => Ok(false),
                Ok(()) => {
                    let mut byte = [0u8; 1];
                    tokio::time::timeout_at(deadline, started.control.read(&mut byte))
                        .await
                        .map(|r| matches!(r, Ok(1)) && byte[0] == b'c')
                }
            };
            match handed {
                Ok(true) => return Ok((started, Handed::Ready)),
                Err(_) => return Ok((started, Handed::TimedOut)),
                Ok(false) if was_ready => {
                    tracing::debug!("a ready jail failed its take-over; starting one for the run");
                    // The failed jail's ids stay held until its processes are gone; the run
                    // goes back to its own.
                    if let Some(own) = previous.take() {
                        match lease.adopt(own) {
                            Ok(theirs) => started.run_ids = theirs,
                            Err((e, _own)) => {
                                // The lease still holds the failed jail's ids: a jail started
                                // now would share them with it while it dies.
                                tokio::spawn(crate::pool::discard(started));
                                return Err(format!("workspace: {e}"));
                            }
                        }
                    }
                    tokio::spawn(crate::pool::discard(started));
                }
                Ok(false) => return Ok((started, Handed::Failed)),
            }
        }
    }

    /// What one read from the SDK channel asks for; `None` when the program closed it.
    fn step<'h>(
        &self,
        frame: Result<Option<sdk::Incoming>, sdk::FrameError>,
        calls: &mut Calls,
        host: &'h dyn ToolHost,
    ) -> Option<Step<'h>> {
        match frame {
            Ok(Some(sdk::Incoming::Line(f, held))) => Some(calls.handle(&f, held, host)),
            Ok(Some(sdk::Incoming::OverBudget { id, bytes })) => {
                Some(calls.over_budget(&id, bytes, self.frames.available()))
            }
            Ok(None) | Err(sdk::FrameError::Io(_)) => None,
            Err(sdk::FrameError::TooLarge) => Some(Step::Abuse(format!(
                "an SDK frame over {} MiB",
                sdk::MAX_FRAME_BYTES >> 20
            ))),
        }
    }

    /// The run's answer once its tree is gone: the helper's report, the memory cgroup's word
    /// on an OOM kill, the wall time.
    async fn finish(
        &self,
        report_r: OwnedFd,
        cgroup: Option<&mcpb_sandbox::RunCgroup>,
        (start, workspace): (Instant, &std::path::Path),
        mut c: Concluded,
    ) -> std::io::Result<Ran> {
        let mut events = read_events(report_r).await;
        if cgroup.is_some_and(mcpb_sandbox::RunCgroup::oom_killed) {
            events.push(Event::OutOfMemory);
        }
        c.events = events;
        if c.calls.result.is_none() {
            let cap =
                usize::try_from(c.limits.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX);
            if let Some(raw) = result_file(workspace, cap) {
                c.calls.result = Some((raw, self.frames.empty()));
            }
        }
        c.wall_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(conclude(c))
    }
}

/// What a ready jail must have been started for to serve a run of `spec`: the same spec, but
/// where the daemon is root (`own_ids`) any host ids, since each jail has its own.
fn pool_key(spec: &JailSpec, own_ids: bool) -> JailSpec {
    let mut key = spec.clone();
    if own_ids {
        (key.host_uid, key.host_gid) = (u32::MAX, u32::MAX);
    }
    key
}

/// The program's `result.json` in the workspace it left, as its result when it never called
/// `result()` (the MCP Exec Broker's workflow): JSON as written, other text as a string. Read
/// only up to one byte past the output budget, which `conclude` then cuts; never followed
/// through a link (the program wrote the file).
fn result_file(
    workspace: &std::path::Path,
    cap: usize,
) -> Option<Box<serde_json::value::RawValue>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let path = workspace.join("result.json");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    if bytes.len() <= cap
        && let Ok(raw) = serde_json::value::RawValue::from_string(text.clone())
    {
        return Some(raw);
    }
    serde_json::value::to_raw_value(&text).ok()
}

/// The base for run cgroups, when a probe cgroup can be made there; the stale cgroups of dead
/// daemons are swept on the way.
fn run_cgroups() -> Option<mcpb_sandbox::CgroupBase> {
    let base = mcpb_sandbox::CgroupBase::find()?;
    let swept = base.sweep();
    if swept > 0 {
        tracing::info!(
            swept,
            "removed memory cgroups left by runs of a stopped daemon"
        );
    }
    if mcpb_sandbox::memory_cgroup_available() {
        Some(base)
    } else {
        tracing::warn!(
            base = %base.dir().display(),
            "no memory cgroup can be made for runs: they are bounded by rlimits and the disk quota only"
        );
        None
    }
}

/// Reads once from an optional pipe; `None` once it is closed (then the branch never fires).
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let Some(p) = pipe.as_mut() else {
        return std::future::pending().await;
    };
    match p.read(buf).await {
        Ok(0) | Err(_) => {
            *pipe = None;
            std::future::pending().await
        }
        Ok(n) => Some(n),
    }
}

/// Reads a pipe to its end, for at most a second (every writer is gone by now).
async fn drain<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>, out: &mut Output, buf: &mut [u8]) {
    let Some(mut p) = pipe else {
        return;
    };
    let all = async {
        while let Ok(n @ 1..) = p.read(buf).await {
            out.take(Some(n), buf);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), all).await;
}

async fn read_events(fd: OwnedFd) -> Vec<Event> {
    let mut file = tokio::fs::File::from_std(std::fs::File::from(fd));
    let mut text = Vec::new();
    let mut limited = (&mut file).take(1 << 20);
    let read = limited.read_to_end(&mut text);
    let _ = tokio::time::timeout(Duration::from_secs(2), read).await;
    text.split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// How the take-over of a jail went.
enum Handed {
    /// The workspace is in; the program waits for its job.
    Ready,
    /// Init refused the workspace and ends the jail; its report says why.
    Failed,
    /// The wall clock ran out while the workspace was being copied in.
    TimedOut,
}
