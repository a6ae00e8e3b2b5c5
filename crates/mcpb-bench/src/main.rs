//! `cargo run --release -p mcpb-bench`: measures the broker against the same upstream spoken to
//! directly, with a lean pipelined JSON-RPC load generator (no SDK in the way), and prints a
//! table. Build the release binary first (`cargo build --release`).
//!
//! Options: `--quick` (fewer calls, for CI smoke runs), `--no-everything` (skip the npm
//! reference server even when .test-deps has it), `--soak` (100 sessions x 1,000 calls through
//! one shared upstream, checked answer by answer, then N clients x M upstreams; exits non-zero
//! on any lost or misrouted answer or leaked process), `--retrieval` (search quality on the
//! tool-retrieval data sets beside a plain BM25 baseline, and search latency at 10,000 tools),
//! `--scan` (the description scan on the public livemcpbench catalog and the injection
//! corpus: ordinary tools flagged, injections caught), `--many` (daemon memory in front of 40 fixture upstreams, ~840 tools; needs the release
//! `mcpb-fixture`: `cargo build --release -p mcpb-testkit`), `--exec` (code runs: start to
//! first SDK call, sandbox setup by layer, SDK call overhead, context saved), `--http` (the HTTP
//! front against the shim: latency, and throughput with 8 and 32 callers), `--first-list` (a
//! client's first raw listing in front of 10 to 100 slow-starting upstreams, cold and warm
//! catalog), `--sessions` (call latency with 1, 32 and 256 sessions calling at once),
//! `--python-sdk` (throughput through the official Python SDK client, direct and brokered),
//! `--redact` (the secret registry with secrets of 128 KiB to 1 MiB), `--scale` (41 real
//! upstreams on a warm catalog: first listing, the daemon tree's processes and memory before
//! and after a call and after the idle time; a ten-server `client import --apply`'s first
//! session; needs `scripts/install-test-deps`).
//! `MCPB_BENCH_CHARTS=DIR` also draws the scaling results (`--many`, `--first-list`,
//! `--sessions`) as SVG charts in DIR.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod charts;
mod console;
mod env;
mod exec;
mod faults;
mod first_list;
mod floor;
mod http;
mod load;
mod many;
mod py_sdk;
mod redact;
mod retrieval;
mod sandbox;
mod scale;
mod scan;
mod scenario;
mod sessions;
mod soak;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == floor::CHILD_FLAG) {
        return floor::child_main(&args[1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let everything = !args.iter().any(|a| a == "--no-everything");
    if args.iter().any(|a| a == "--retrieval") {
        return retrieval::run();
    }
    if args.iter().any(|a| a == "--scan") {
        return scan::run();
    }
    if args.iter().any(|a| a == "--redact") {
        return redact::run();
    }
    if args.iter().any(|a| a == "--http") {
        return http::run(quick);
    }
    if args.iter().any(|a| a == "--exec") {
        return exec::run(quick);
    }
    if args.iter().any(|a| a == "--first-list") {
        return first_list::run(quick);
    }
    if args.iter().any(|a| a == "--python-sdk") {
        return py_sdk::run(quick);
    }
    if args.iter().any(|a| a == "--scale") {
        return scale::run(quick);
    }
    if args.iter().any(|a| a == "--sandbox") {
        return sandbox::run(quick);
    }
    let mode = if args.iter().any(|a| a == "--soak") {
        scenario::Mode::Soak
    } else if args.iter().any(|a| a == "--sessions") {
        scenario::Mode::Sessions
    } else if args.iter().any(|a| a == "--many") {
        scenario::Mode::Many
    } else {
        scenario::Mode::Measure
    };
    scenario::run(quick, everything, mode)
}
