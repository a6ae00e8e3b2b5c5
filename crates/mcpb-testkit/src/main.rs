//! `mcpb-fixture`: a deliberately hand-written MCP stdio server for the broker's tests. Every
//! fault the broker must survive is one tool call or one flag away: slow, crashing and hanging
//! calls, progress floods, garbage and oversized output, foreign response ids, vendor fields,
//! list changes, server-to-client requests, grandchildren, and a process that ignores EOF.
//!
//! It must stay free of the broker's own crates, so that it can misbehave in ways they would
//! refuse to produce.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hostile;
mod server;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--launcher") {
        // Like `npx`: start the real server as a child sharing our stdio, and wait for it.
        let exe = std::env::current_exe().expect("own path");
        let status = std::process::Command::new(exe)
            .args(&args[1..])
            .status()
            .expect("spawn the server");
        std::process::exit(status.code().unwrap_or(1));
    }
    server::run(server::Options::parse(&args));
}
