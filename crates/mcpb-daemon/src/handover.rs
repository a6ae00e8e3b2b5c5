//! Taking over a client's stdio from the shim. The shim passes its stdin and stdout with
//! SCM_RIGHTS, so frames go client <-> daemon directly instead of through a relay process: two
//! process hops and two copies less per message.

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;

use rustix::fs::FileType;
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

pub(crate) type Reader = Pin<Box<dyn AsyncRead + Send>>;
pub(crate) type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// Receives the two descriptors the shim sends after the hello reply.
pub(crate) async fn receive(stream: &UnixStream) -> io::Result<(OwnedFd, OwnedFd)> {
    loop {
        stream.readable().await?;
        let got = stream.try_io(Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut byte = [0u8; 1];
            let msg = rustix::net::recvmsg(
                stream,
                &mut [IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )?;
            let mut fds = Vec::new();
            for m in control.drain() {
                if let RecvAncillaryMessage::ScmRights(iter) = m {
                    fds.extend(iter);
                }
            }
            if msg.bytes == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "shim closed before passing its stdio",
                ));
            }
            Ok(fds)
        });
        match got {
            Ok(fds) => {
                let mut fds = fds.into_iter();
                return match (fds.next(), fds.next()) {
                    (Some(input), Some(output)) => Ok((input, output)),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "expected two descriptors from the shim",
                    )),
                };
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn kind(fd: &OwnedFd) -> io::Result<FileType> {
    Ok(FileType::from_raw_mode(
        rustix::fs::fstat(fd.as_fd())?.st_mode,
    ))
}

/// Wraps the client's stdin for async reading. Pipes and sockets only: the shim never offers
/// anything else.
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "a client's stdin is a pipe or a socket; anything else is refused"
)]
pub(crate) fn reader(fd: OwnedFd) -> io::Result<Reader> {
    match kind(&fd)? {
        FileType::Fifo => Ok(Box::pin(pipe::Receiver::from_owned_fd(fd)?)),
        FileType::Socket => Ok(Box::pin(socket(fd)?)),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("client stdin is a {other:?}"),
        )),
    }
}

#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "a client's stdout is a pipe or a socket; anything else is refused"
)]
pub(crate) fn writer(fd: OwnedFd) -> io::Result<Writer> {
    match kind(&fd)? {
        FileType::Fifo => Ok(Box::pin(pipe::Sender::from_owned_fd(fd)?)),
        FileType::Socket => Ok(Box::pin(socket(fd)?)),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("client stdout is a {other:?}"),
        )),
    }
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    UnixStream::from_std(std)
}
