//! `mcpb-bench --redact`: what the secret registry costs with long secrets: the time to register
//! one, and to redact a text that shows it whole, shows it with a character changed every
//! 64 KiB, shows nothing of it (1 MiB of other text), and a 1 KiB line; medians of 5. Then
//! what every listing answer costs once a secret is registered: a 1,000-tool `tools/list`
//! result (about 3 MiB of JSON) redacted whole, as the daemon does before it reads one.

use std::time::{Duration, Instant};

/// A base64-like value of `n` characters, different for each `seed`.
fn secret(n: usize, seed: u64) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x = 0x9E37_79B9_7F4A_7C15 ^ seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(B64[(x >> 58) as usize])
        })
        .collect()
}

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut runs: Vec<Duration> = (0..5).map(|_| f()).collect();
    runs.sort();
    runs[2]
}

fn timed(text: &str) -> Duration {
    let start = Instant::now();
    let out = mcpb_redact::redact(text);
    std::hint::black_box(out);
    start.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

pub(crate) fn run() -> anyhow::Result<()> {
    println!(
        "| secret | register ms | whole ms | changed every 64 KiB ms | 1 MiB without it ms | 1 KiB line ms |"
    );
    println!("|---|---|---|---|---|---|");
    let other = secret(1 << 20, 999);
    let line = &other[..1024];
    for (i, kib) in [128usize, 256, 1024].into_iter().enumerate() {
        let s = secret(kib << 10, i as u64 + 1);
        let start = Instant::now();
        mcpb_redact::register(&s);
        let register = start.elapsed();
        let whole = format!("error: {s} refused");
        let mut changed = s.clone().into_bytes();
        for at in (1000..changed.len()).step_by(64 << 10) {
            changed[at] = b'#';
        }
        let changed = String::from_utf8(changed)?;
        println!(
            "| {kib} KiB | {} | {} | {} | {} | {} |",
            ms(register),
            ms(median(|| timed(&whole))),
            ms(median(|| timed(&changed))),
            ms(median(|| timed(&other))),
            ms(median(|| timed(line))),
        );
    }
    let tools: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            serde_json::json!({"name": format!("tool_{i}"),
                "description": secret(2800, 10_000 + i as u64),
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string",
                    "description": "what to look for"}}}})
        })
        .collect();
    let list = serde_json::json!({"tools": tools}).to_string();
    let d = median(|| {
        let start = Instant::now();
        std::hint::black_box(mcpb_redact::redact_json(&list));
        start.elapsed()
    });
    println!(
        "\n| a tools/list answer, {:.1} MiB, 1,000 tools, secrets registered | {} ms |",
        list.len() as f64 / f64::from(1u32 << 20),
        ms(d)
    );
    Ok(())
}
