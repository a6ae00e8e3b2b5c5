//! The web console's cost: started through the CLI as a person would, then every page asked
//! for once (under the session's path), so the daemon's RSS afterwards includes the console's
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

/// Starts the console and shows each page once; returns how many pages answered 200, and
/// the daemon's RSS (KiB) after the start and after each page.
pub(crate) fn show_every_page(env: &Env, pid: u64) -> anyhow::Result<(usize, Vec<(String, u64)>)> {
    let out = env.broker(&["console", "--no-open"]).output()?;
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .ok_or_else(|| anyhow::anyhow!("console said {url:?}"))?;
    let (port, key) = rest
        .split_once("/login?key=")
        .ok_or_else(|| anyhow::anyhow!("console said {url:?}"))?;
    let port: u16 = port.parse()?;
    let login = get(port, &format!("/login?key={key}"))?;
    let home = login
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .and_then(|l| l.trim().strip_suffix("servers"))
        .ok_or_else(|| anyhow::anyhow!("the login answered {login:?}"))?
        .to_string();
    let mut shown = 0;
    let settle = || std::thread::sleep(std::time::Duration::from_millis(300));
    settle();
    let mut rss = vec![("started".to_string(), crate::env::rss_kib(pid))];
    for page in PAGES {
        if get(port, &format!("{home}{}", page.trim_start_matches('/')))?
            .starts_with("HTTP/1.1 200")
        {
            shown += 1;
        }
        settle();
        rss.push((page.to_string(), crate::env::rss_kib(pid)));
    }
    Ok((shown, rss))
}

fn get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}
