//! `mcpb-bench --sessions`: call latency with 1, 32 and 256 client sessions open and calling
//! at once, each a shim making sequential `tools/call`s to one shared upstream.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::env::Env;
use crate::load::{Peer, percentile};

pub(crate) fn run(env: &Env, quick: bool) -> anyhow::Result<()> {
    env.start()?;
    let counts: &[usize] = if quick { &[1, 8] } else { &[1, 32, 256] };
    println!("| sessions calling at once | calls | p50 ms | p99 ms | calls/s overall |");
    println!("|---|---|---|---|---|");
    let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
    for &n in counts {
        // About 4,000 calls per row, at least 20 per session.
        let each = (4000 / n).max(20);
        let peers = (0..n)
            .map(|_| {
                let mut p = Peer::spawn(
                    env.broker(&["stdio"]),
                    "example.echo",
                    r#"{"message":"benchmark payload"}"#,
                )?;
                p.latencies(5)?;
                Ok(p)
            })
            .collect::<anyhow::Result<Vec<Peer>>>()?;
        let start = Arc::new(Barrier::new(n + 1));
        let threads: Vec<_> = peers
            .into_iter()
            .map(|mut p| {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let got = p.latencies(each);
                    p.close();
                    got
                })
            })
            .collect();
        start.wait();
        let t = std::time::Instant::now();
        let mut all: Vec<Duration> = Vec::new();
        for th in threads {
            let got = th
                .join()
                .map_err(|_| anyhow::anyhow!("a session's thread panicked"))??;
            all.extend(got);
        }
        let took = t.elapsed();
        all.sort();
        let (p50, p99) = (percentile(&all, 0.5), percentile(&all, 0.99));
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {n} | {} | {:.3} | {:.3} | {:.0} |",
            all.len(),
            ms(p50),
            ms(p99),
            all.len() as f64 / took.as_secs_f64()
        );
        p50s.push((n as f64, ms(p50)));
        p99s.push((n as f64, ms(p99)));
    }
    let _ = env.broker(&["stop"]).output()?;
    crate::charts::line_chart(
        "latency_vs_sessions",
        "Call latency against sessions calling at once",
        "client sessions",
        "latency (ms)",
        &[("p50".into(), p50s), ("p99".into(), p99s)],
    )?;
    Ok(())
}
