//! The web console's cost: started through the CLI as a person would, then every page asked
//! for once (with the key's cookie), so the daemon's RSS afterwards includes the console's
//! code and state.

use std::io::{Read, Write};

use crate::env::Env;

const PAGES: [&str; 7] = [
    "/servers",
    "/tools",
    "/trust",
    "/activity",
    "/context",
    "/charts",
    "/assets/console.css",
];

/// Starts the console and shows each page once; returns how many pages answered 200.
pub(crate) fn show_every_page(env: &Env) -> anyhow::Result<usize> {
    let out = env.broker(&["console", "--no-open"]).output()?;
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .ok_or_else(|| anyhow::anyhow!("console said {url:?}"))?;
    let (port, key) = rest
        .split_once("/login?key=")
        .ok_or_else(|| anyhow::anyhow!("console said {url:?}"))?;
    let port: u16 = port.parse()?;
    let mut shown = 0;
    for page in PAGES {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        write!(
            s,
            "GET {page} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: mcpb_console={key}\r\nConnection: close\r\n\r\n"
        )?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        if answer.starts_with("HTTP/1.1 200") {
            shown += 1;
        }
    }
    Ok(shown)
}
