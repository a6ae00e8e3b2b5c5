//! `mcpb-bench --retrieval`: the broker's tool search on public tool-retrieval data sets
//! (`../shared/data/tool-retrieval/<set>/{tools,queries}.jsonl`), beside a plain BM25 baseline,
//! with the metrics of those sets' README; then search latency and index build time on a
//! 10,000-tool catalog made from the same tools.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use mcpb_catalog::{Index, ToolDoc, Weights};
use serde_json::Value;

struct Query {
    text: String,
    gold: Vec<String>,
    groups: Vec<Vec<String>>,
}

pub(crate) fn read_jsonl(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn load(dir: &Path) -> anyhow::Result<(Vec<ToolDoc>, Vec<Query>)> {
    let tools = read_jsonl(&dir.join("tools.jsonl"))?
        .iter()
        .map(|t| {
            let id = t["id"].as_str().unwrap_or_default();
            let server = t["server"].as_str().unwrap_or_default();
            let server_text = t["server_title"].as_str().unwrap_or_default();
            ToolDoc::from_definition(id, server, server_text, t)
        })
        .collect();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let queries = read_jsonl(&dir.join("queries.jsonl"))?
        .iter()
        .map(|q| Query {
            text: q["query"].as_str().unwrap_or_default().to_string(),
            gold: strings(&q["gold"]),
            groups: q["gold_groups"]
                .as_array()
                .into_iter()
                .flatten()
                .map(strings)
                .collect(),
        })
        .collect();
    Ok((tools, queries))
}

#[derive(Default)]
struct Metrics {
    r1: f64,
    r5: f64,
    r10: f64,
    mrr: f64,
}

fn evaluate(tools: &[ToolDoc], queries: &[Query], weights: Weights, label: &str) -> Metrics {
    // Each request's ranking, for analysis outside the bench (`MCPB_DUMP=<file>`).
    let mut dump = std::env::var_os("MCPB_DUMP").and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
    });
    // Misses of the broker's own ranking only, not of the baseline.
    let debug = std::env::var_os("MCPB_RETRIEVAL_DEBUG").is_some() && weights.analyze;
    let index = Index::build(tools, weights);
    let mut m = Metrics::default();
    for q in queries {
        let ranked: Vec<&str> = index
            .search(&q.text, 100, &|_| true)
            .iter()
            .map(|h| tools[h.doc].id.as_str())
            .collect();
        if let Some(f) = dump.as_mut() {
            use std::io::Write;
            let line = serde_json::json!({"label": label, "query": q.text, "groups": q.groups,
                "ranked": &ranked[..20.min(ranked.len())]});
            let _ = writeln!(f, "{line}");
        }
        let recall = |k: usize| {
            let top = &ranked[..k.min(ranked.len())];
            let found = q
                .groups
                .iter()
                .filter(|g| g.iter().any(|id| top.contains(&id.as_str())))
                .count();
            found as f64 / q.groups.len().max(1) as f64
        };
        if debug && recall(5) < 1.0 {
            let ranks: Vec<Option<usize>> = q
                .gold
                .iter()
                .map(|g| ranked.iter().position(|id| id == g).map(|r| r + 1))
                .collect();
            eprintln!(
                "Q: {}\n  top5: {:?}\n  gold: {:?}\n  gold ranks: {ranks:?}",
                q.text.chars().take(160).collect::<String>(),
                &ranked[..5.min(ranked.len())],
                q.gold
            );
        }
        m.r1 += recall(1);
        m.r5 += recall(5);
        m.r10 += recall(10);
        if let Some(rank) = ranked.iter().position(|id| q.gold.iter().any(|g| g == id)) {
            m.mrr += 1.0 / (rank + 1) as f64;
        }
    }
    let n = queries.len().max(1) as f64;
    Metrics {
        r1: m.r1 / n,
        r5: m.r5 / n,
        r10: m.r10 / n,
        mrr: m.mrr / n,
    }
}

/// The weight of the static embeddings in the hybrid rows (`MCPB_DENSE` to explore), until the
/// broker's own ranking turns them on.
fn hybrid_dense() -> f32 {
    std::env::var("MCPB_DENSE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(mcpb_catalog::search::STATIC_WEIGHT)
}

/// Whether the transformer tier can run: built with `semantic-minilm` and its weights found in
/// `MCPB_MINILM_DIR` (scripts/install-minilm puts them there).
fn minilm_ready() -> bool {
    #[cfg(feature = "semantic-minilm")]
    {
        let Some(dir) = std::env::var_os("MCPB_MINILM_DIR") else {
            return false;
        };
        match mcpb_catalog::minilm::init(Path::new(&dir)) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("MiniLM tier left out: {e}");
                false
            }
        }
    }
    #[cfg(not(feature = "semantic-minilm"))]
    {
        false
    }
}

/// The transformer's weight in its rerank (`MCPB_RERANK` to explore).
fn rerank_weight() -> f32 {
    std::env::var("MCPB_RERANK")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(mcpb_catalog::search::RERANK_WEIGHT)
}

/// Where the tool-retrieval data sets live (`MCPB_RETRIEVAL_DATA` or `../shared/data`).
pub(crate) fn data_root() -> PathBuf {
    std::env::var_os("MCPB_RETRIEVAL_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tool-retrieval")
        })
}

pub(crate) fn run() -> anyhow::Result<()> {
    let root = data_root();
    let (all_tools, all_queries) = quality(&root)?;
    if all_tools.is_empty() {
        return Ok(());
    }
    speed(&catalog_of(&all_tools, 10_000), &all_queries)?;
    context(&root)
}

/// Each data set's recall and MRR per ranking; gives every set's tools and query texts.
fn quality(root: &Path) -> anyhow::Result<(Vec<ToolDoc>, Vec<String>)> {
    println!("| data set | ranking | R@1 | R@5 | R@10 | MRR |");
    println!("|---|---|---|---|---|---|");
    let mut all_tools = Vec::new();
    let mut rerank_cost = Vec::new();
    let mut all_queries = Vec::new();
    for set in ["livemcpbench", "livemcpbench-routes", "bfcl-live"] {
        let dir = root.join(set);
        if !dir.is_dir() {
            println!("| {set} | (not found under {}) | | | | |", root.display());
            continue;
        }
        let (tools, queries) = load(&dir)?;
        for (label, weights) in rankings() {
            let reranks = weights.rerank > 0.0;
            let t = Instant::now();
            let m = evaluate(&tools, &queries, weights, &format!("{set}/{label}"));
            println!(
                "| {set} ({} queries) | {label} | {:.3} | {:.3} | {:.3} | {:.3} |",
                queries.len(),
                m.r1,
                m.r5,
                m.r10,
                m.mrr
            );
            if reranks {
                rerank_cost.push((set, t.elapsed(), queries.len()));
            }
        }
        all_queries.extend(queries.into_iter().map(|q| q.text));
        all_tools.extend(tools);
    }
    for (set, took, n) in rerank_cost {
        eprintln!(
            "MiniLM rerank on {set}: {:.1} ms per request, each tool's vector computed once included",
            took.as_secs_f64() * 1000.0 / n.max(1) as f64
        );
    }
    Ok((all_tools, all_queries))
}

/// The rankings compared, each a row (`MCPB_ROWS` keeps those whose label contains it).
fn rankings() -> Vec<(&'static str, Weights)> {
    let tuned = tuned_weights();
    let words_only = Weights {
        dense: 0.0,
        ..tuned.clone()
    };
    let mut rows = vec![
        ("plain BM25", Weights::plain_bm25()),
        ("BM25F alone", words_only),
        ("static embeddings alone", Weights::static_only()),
        ("hybrid (BM25F + static, 0.6)", tuned.clone()),
    ];
    if minilm_ready() {
        rows.push((
            "hybrid + MiniLM rerank of the top 30",
            Weights {
                rerank: rerank_weight(),
                ..tuned.clone()
            },
        ));
    }
    let only = std::env::var("MCPB_ROWS").unwrap_or_default();
    rows.retain(|(label, _)| label.contains(only.as_str()));
    rows
}

/// The broker's weights with the hybrid's dense weight, changed by `MCPB_WEIGHTS` to explore.
fn tuned_weights() -> Weights {
    let mut tuned = Weights::broker();
    if let Ok(spec) = std::env::var("MCPB_WEIGHTS") {
        // Exploration only: "name,desc,params,param_text,server,k1,b_name,b_desc[,related,sibling,implied]"
        let v: Vec<f32> = spec.split(',').filter_map(|x| x.parse().ok()).collect();
        if let Some(r) = v.get(8) {
            tuned.related = *r;
        }
        if let Some(x) = v.get(9) {
            tuned.sibling = *x;
        }
        if let Some(x) = v.get(10) {
            tuned.implied = *x;
        }
        if v.len() >= 8 {
            tuned.field = [v[0], v[1], v[2], v[3], v[4]];
            tuned.k1 = v[5];
            tuned.b[0] = v[6];
            tuned.b[1] = v[7];
        }
    }
    tuned.dense = hybrid_dense();
    tuned
}

/// A catalog of `size` tools: the data sets' tools repeated under new upstream names.
fn catalog_of(tools: &[ToolDoc], size: usize) -> Vec<ToolDoc> {
    let mut catalog = Vec::with_capacity(size);
    let mut copy = 0;
    while catalog.len() < size {
        for t in tools {
            if catalog.len() == size {
                break;
            }
            let mut t = t.clone();
            t.server = format!("{}-{copy}", t.server);
            t.id = format!("{}.{}", t.server, t.name);
            catalog.push(t);
        }
        copy += 1;
    }
    catalog
}

/// Index build time and search latency on the catalog, per ranking.
fn speed(catalog: &[ToolDoc], queries: &[String]) -> anyhow::Result<()> {
    println!();
    println!(
        "| catalog | ranking | index build (median of 5) | search p50 | search p99 | queries |"
    );
    println!("|---|---|---|---|---|---|");
    let hybrid = Weights {
        dense: hybrid_dense(),
        ..Weights::broker()
    };
    // The daemon's restart: the vectors read from the catalog's cache file, then the build.
    let cache_file =
        std::env::temp_dir().join(format!("mcpb-bench-vectors-{}.bin", std::process::id()));
    let open_cache = || {
        mcpb_catalog::VectorCache::open(
            cache_file.clone(),
            mcpb_catalog::embed::VECTORS_KEY,
            mcpb_catalog::embed::DIM,
        )
        .0
    };
    let filled = open_cache();
    Index::build_cached(catalog, hybrid.clone(), Some(&filled));
    filled.save()?;
    for (label, weights, cached) in [
        ("BM25F alone", Weights::broker(), false),
        ("hybrid", hybrid.clone(), false),
        ("hybrid, vectors from the cache file", hybrid, true),
    ] {
        let build = |weights: Weights| {
            if cached {
                Index::build_cached(catalog, weights, Some(&open_cache()))
            } else {
                Index::build(catalog, weights)
            }
        };
        time_index(catalog, label, weights, build, queries);
    }
    let _ = std::fs::remove_file(&cache_file);
    Ok(())
}

/// One row of `speed`: the median of five builds, and each query searched three times.
fn time_index(
    catalog: &[ToolDoc],
    label: &str,
    weights: Weights,
    build: impl Fn(Weights) -> Index,
    queries: &[String],
) {
    let mut builds = Vec::new();
    let mut index = Index::build(catalog, weights.clone());
    for _ in 0..5 {
        let t = Instant::now();
        index = build(weights.clone());
        builds.push(t.elapsed());
    }
    builds.sort();
    let median_build = builds[builds.len() / 2];
    let mut times = Vec::new();
    for _ in 0..3 {
        for q in queries {
            let t = Instant::now();
            let hits = index.search(q, 10, &|_| true);
            times.push(t.elapsed());
            std::hint::black_box(hits);
        }
    }
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    println!(
        "| {} tools | {label} | {:.1} ms | {:.0} µs | {:.0} µs | {} |",
        index.len(),
        median_build.as_secs_f64() * 1000.0,
        pct(0.5),
        pct(0.99),
        times.len()
    );
}

/// What the facade saves in a model's context on these catalogs: every tool definition (MCP
/// fields only, as an upstream lists them) against the facade's seven definitions.
fn context(root: &Path) -> anyhow::Result<()> {
    let bpe = tiktoken_rs::o200k_base().map_err(|e| anyhow::anyhow!("o200k_base: {e}"))?;
    let facade = serde_json::to_string(&mcpb_daemon::tools::definitions(
        mcpb_daemon::tools::Naming::broker("."),
        Some(100_000),
        false,
    ))?;
    let after = bpe.encode_ordinary(&facade).len();
    println!();
    println!("| catalog | tools | before (o200k tokens) | after: facade | reduction |");
    println!("|---|---|---|---|---|");
    for set in ["livemcpbench", "bfcl-live"] {
        let path = root.join(set).join("tools.jsonl");
        if !path.is_file() {
            continue;
        }
        let tools: Vec<Value> = read_jsonl(&path)?
            .into_iter()
            .map(|t| mcpb_catalog::canonical::pinned_part(&t))
            .collect();
        let before = bpe.encode_ordinary(&serde_json::to_string(&tools)?).len();
        println!(
            "| {set} | {} | {before} | {after} | {:.1}% |",
            tools.len(),
            100.0 * (1.0 - after as f64 / before as f64)
        );
    }
    Ok(())
}
