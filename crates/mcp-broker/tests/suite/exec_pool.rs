//! Jails started ahead of their runs (`broker.exec.pool`): a run takes over one whose
//! interpreter is already up and confined, and that jail serves it alone. Nothing a run leaves
//! in its interpreter, its /tmp or its processes reaches the next run.

use std::time::Duration;

use super::exec_escape::Jail;

/// The seconds since boot at which this process started, and the time now, from inside the
/// jail (None where the jail has no /proc).
const AGE: &str = r#"
import os, time
def started_before_the_job():
    try:
        fields = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
    except OSError:
        return None
    started = int(fields[19]) / os.sysconf('SC_CLK_TCK')
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started
"#;

#[test]
fn a_run_takes_over_a_started_jail_and_nothing_of_the_last_run_is_in_it() {
    let jail = Jail::new();
    // The first run of its kind starts its own jail; one for the next starts when it ends.
    let first = jail.run(
        "import builtins, subprocess, sys\n\
         builtins.left_behind = 1\n\
         sys.modules['left_behind'] = sys\n\
         open('/tmp/left-behind', 'w').write('x')\n\
         open('/work/kept.txt', 'w').write('x')\n\
         subprocess.Popen(['sleep', '60'])\n\
         print('first')\n",
        &[],
    );
    assert_eq!(first["status"], "ok", "{first}");
    waiting_interpreters(&jail, Duration::from_millis(700));
    let second = jail.run(
        &format!(
            "{AGE}\nimport builtins, os, subprocess, sys\n\
             print('builtins', hasattr(builtins, 'left_behind'))\n\
             print('modules', 'left_behind' in sys.modules)\n\
             print('tmp', os.path.exists('/tmp/left-behind'))\n\
             print('work', sorted(os.listdir('/work')))\n\
             print('sleep', subprocess.run(['pgrep', 'sleep'], capture_output=True).stdout != b'')\n\
             age = started_before_the_job()\n\
             print('age', 'none' if age is None else age > 0.5)\n"
        ),
        &[],
    );
    assert_eq!(second["status"], "ok", "{second}");
    let out = second["stdout"].as_str().unwrap();
    for line in [
        "builtins False",
        "modules False",
        "tmp False",
        "work ['.tmp']",
        "sleep False",
    ] {
        assert!(out.contains(line), "{line:?} not in {out}");
    }
    // The interpreter was up well before this run's job came (the jail was started after the
    // first run, at least 0.7 s before this one).
    assert!(
        out.contains("age True") || out.contains("age none"),
        "the second run's interpreter started with it: {out}"
    );
}

#[test]
fn a_pooled_run_reports_errors_and_runs_workspace_files_as_a_fresh_one_does() {
    let jail = Jail::new();
    jail.still_works();
    waiting_interpreters(&jail, Duration::ZERO);
    // A traceback names the snippet's line and shows its text, as with a fresh interpreter.
    let a = jail.run("x = 1\nraise ValueError('from the snippet')\n", &[]);
    assert_eq!(a["status"], "error", "{a}");
    let err = a["stderr"].as_str().unwrap();
    assert!(err.contains("/sdk/main.py\", line 2"), "{err}");
    assert!(
        err.contains("raise ValueError('from the snippet')"),
        "{err}"
    );
    assert!(err.contains("ValueError: from the snippet"), "{err}");
    assert!(!err.contains("runner.py"), "{err}");
    // `__name__`, argv and the SDK as a snippet sees them.
    waiting_interpreters(&jail, Duration::ZERO);
    let b = jail.run(
        "import sys\nfrom mcp_sdk import call_tool\nprint(__name__, sys.argv, __file__)\nprint(call_tool('example.echo', {'message': 'hi'}))\n",
        &[],
    );
    assert_eq!(b["status"], "ok", "{b}");
    let out = b["stdout"].as_str().unwrap();
    assert!(
        out.contains("__main__ ['/sdk/main.py'] /sdk/main.py"),
        "{out}"
    );
    assert!(out.contains("hi"), "{out}");
}

/// The processes under `pid` (children, their children, ...), from /proc.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{p}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        all.push((p, ppid, cmd));
    }
    let mut out = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, pp, cmd) in &all {
            if *pp == parent {
                out.push((*p, cmd.clone()));
                parents.push(*p);
            }
        }
    }
    out
}

#[test]
fn a_ready_jail_whose_interpreter_died_is_not_taken_over() {
    let jail = Jail::new();
    jail.still_works();
    let daemon = jail.home.daemon_pid().unwrap();
    let waiting = waiting_interpreters(&jail, Duration::ZERO);
    // Someone kills the waiting interpreter (a careless `pkill python3`, the OOM killer).
    for p in &waiting {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(*p as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    // Its jail ends with it (init watches it): nothing of it is left under the daemon.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while descendants(daemon).iter().any(|(p, _)| waiting.contains(p)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the killed interpreter stays"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The next run is not handed a dead runtime: it runs, in a jail of its own.
    jail.still_works();
}

/// Seconds since process `pid` started (/proc's clock ticks are USER_HZ, 100 on Linux).
fn age(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let start: f64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(uptime - start / 100.0)
}

/// Waits (10 s at most) until the daemon has an interpreter waiting for a run, started at
/// least `older_than` ago; its pids.
fn waiting_interpreters(jail: &Jail, older_than: Duration) -> Vec<u32> {
    let daemon = jail.home.daemon_pid().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<u32> = descendants(daemon)
            .into_iter()
            .filter(|(p, cmd)| {
                cmd.contains("/sdk/runner.py")
                    && age(*p).is_some_and(|a| a >= older_than.as_secs_f64())
            })
            .map(|(p, _)| p)
            .collect();
        if !found.is_empty() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no interpreter waiting for the next run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
