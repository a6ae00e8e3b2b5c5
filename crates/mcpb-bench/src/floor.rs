//! What relaying alone costs on this machine: the same calls through a process that copies
//! bytes between the client and the upstream and does nothing else. The daemon's CPU per call
//! is read against these rows; the part above them is the broker's own work, the rest is the
//! kernel's price for the extra process (its reads, writes and the wake-ups they cause).
//!
//! Two relays: the daemon's own model (tokio's current-thread runtime on epoll, one task per
//! direction), and the cheapest a relay process can be (a blocked thread per direction, no
//! event loop: two system calls per message instead of three).

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The flag the benchmark runs itself with to become a relay: `--relay-child KIND -- CMD ARGS`.
pub(crate) const CHILD_FLAG: &str = "--relay-child";

/// The two kinds of relay, as named on the command line and in the table.
pub(crate) const KINDS: [(&str, &str); 2] = [
    (
        "epoll",
        "a bare relay process (tokio current-thread, epoll)",
    ),
    (
        "threads",
        "a bare relay process (a blocked thread per direction)",
    ),
];

/// The command that runs this benchmark as a relay of `kind` in front of `upstream`.
pub(crate) fn command(kind: &str, upstream: &[String]) -> anyhow::Result<Command> {
    let mut c = Command::new(std::env::current_exe()?);
    c.arg(CHILD_FLAG).arg(kind).arg("--").args(upstream);
    Ok(c)
}

/// The relay process's main: `args` are what followed `--relay-child`.
pub(crate) fn child_main(args: &[String]) -> anyhow::Result<()> {
    let (kind, rest) = args.split_first().context("relay kind")?;
    let upstream = rest
        .iter()
        .position(|a| a == "--")
        .map(|i| &rest[i + 1..])
        .context("-- CMD")?;
    let (program, up_args) = upstream.split_first().context("upstream command")?;
    let mut child = Command::new(program)
        .args(up_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn upstream")?;
    let up_in = child.stdin.take().context("upstream stdin")?;
    let up_out = child.stdout.take().context("upstream stdout")?;
    match kind.as_str() {
        "threads" => threads(up_in, up_out)?,
        "epoll" => epoll(up_in.into(), up_out.into())?,
        other => bail!("unknown relay kind {other}"),
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}

fn threads(
    mut up_in: std::process::ChildStdin,
    mut up_out: std::process::ChildStdout,
) -> anyhow::Result<()> {
    // Plain read/write loops: `std::io::copy` would splice between pipes, which is not what
    // a relay that looks at its messages can do.
    let back = std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = up_out.read(&mut buf) {
            if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                break;
            }
        }
    });
    let mut input = std::io::stdin().lock();
    let mut buf = vec![0u8; 8192];
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        up_in.write_all(&buf[..n])?;
    }
    drop(up_in);
    let _ = back.join();
    Ok(())
}

fn epoll(up_in: std::os::fd::OwnedFd, up_out: std::os::fd::OwnedFd) -> anyhow::Result<()> {
    use tokio::net::unix::pipe;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let stdin = pipe::Receiver::from_owned_fd(std::io::stdin().as_fd().try_clone_to_owned()?)?;
        let stdout = pipe::Sender::from_owned_fd(std::io::stdout().as_fd().try_clone_to_owned()?)?;
        let up_in = pipe::Sender::from_owned_fd(up_in)?;
        let up_out = pipe::Receiver::from_owned_fd(up_out)?;
        // Input's end closes the upstream's input; its answers are relayed until it closes.
        let forward = tokio::spawn(pump(stdin, up_in));
        let back = tokio::spawn(pump(up_out, stdout));
        let _ = forward.await;
        let _ = back.await;
        anyhow::Ok(())
    })
}

async fn pump(mut from: tokio::net::unix::pipe::Receiver, mut to: tokio::net::unix::pipe::Sender) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}
