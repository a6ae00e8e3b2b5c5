//! BM25F over tool documents. Each field (name parts, description, parameter names, parameter
//! descriptions, upstream text) has its own weight and length normalisation; term frequencies
//! are combined across fields before saturation, so a word found in the name and the
//! description counts once, strongly, instead of twice. The upstream's own name is a field of
//! low weight, so a query naming an upstream helps without drowning everything else in that
//! upstream's tools.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::doc::ToolDoc;
use crate::text;
use crate::vectors::VectorCache;

pub const FIELDS: usize = 5;

/// The static embeddings' weight in the hybrid ranking (`Weights::dense`), measured on the public
/// queries of the retrieval data sets (`mcpb-bench --retrieval`).
pub const STATIC_WEIGHT: f32 = 0.6;

/// Candidates the transformer tier reranks.
pub const RERANK_DEPTH: usize = 30;

/// The transformer tier's weight in its rerank (`Weights::rerank`), measured like
/// `STATIC_WEIGHT`.
pub const RERANK_WEIGHT: f32 = 1.0;

/// A multiply-rotate hash (the one rustc uses internally): terms are short, trusted strings, so
/// SipHash's flooding resistance buys nothing and costs a third of the build time.
#[derive(Default)]
struct TermHasher(u64);

impl Hasher for TermHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Dict = HashMap<String, u32, BuildHasherDefault<TermHasher>>;

#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// name, description, parameter names, parameter descriptions, upstream text
    pub field: [f32; FIELDS],
    pub b: [f32; FIELDS],
    pub k1: f32,
    /// Stem and drop stopwords (off for the plain baseline).
    pub analyze: bool,
    /// Put every field into one (the plain baseline).
    pub single_field: bool,
    /// Weight of a related word added for a request word (see `text::related`).
    pub related: f32,
    /// Share of the best score among a tool's siblings (same upstream) added to its own: a task
    /// that needs one tool of an upstream usually needs its neighbours too.
    pub sibling: f32,
    /// Weight of words implied by paths and URLs in the request (see `text::implied`).
    pub implied: f32,
    /// Weight of the cosine between the request's and a tool's static embeddings (see
    /// `embed`), added to the BM25F score scaled to the request's best; 0 turns it off.
    pub dense: f32,
    /// Weight of the transformer tier's cosine when it reranks the best candidates (feature
    /// `semantic-minilm`, model loaded); 0 turns it off.
    pub rerank: f32,
}

impl Weights {
    /// The broker's ranking.
    pub fn broker() -> Self {
        Self {
            field: [3.0, 1.0, 1.2, 0.4, 0.5],
            b: [0.3, 0.75, 0.5, 0.75, 0.75],
            k1: 1.2,
            analyze: true,
            single_field: false,
            related: 0.5,
            sibling: 0.25,
            implied: 1.5,
            dense: 0.0,
            rerank: 0.0,
        }
    }

    /// The static embeddings alone (no word matching), as a reference.
    pub fn static_only() -> Self {
        Self {
            field: [0.0; FIELDS],
            sibling: 0.0,
            dense: 1.0,
            ..Self::broker()
        }
    }

    /// Plain BM25 over name + description + parameter names, as a reference.
    pub fn plain_bm25() -> Self {
        Self {
            field: [1.0, 0.0, 0.0, 0.0, 0.0],
            b: [0.75; FIELDS],
            k1: 1.2,
            analyze: false,
            single_field: true,
            related: 0.0,
            sibling: 0.0,
            implied: 0.0,
            dense: 0.0,
            rerank: 0.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Position of the document in the slice the index was built from.
    pub doc: usize,
    pub score: f32,
}

#[derive(Debug)]
pub struct Index {
    weights: Weights,
    /// Per document and field: number of terms.
    lengths: Vec<[u32; FIELDS]>,
    avg: [f32; FIELDS],
    /// Term -> position in `postings`.
    dict: Dict,
    postings: Vec<Vec<(u32, [u16; FIELDS])>>,
    /// Per document: its upstream; per upstream: its documents.
    server_of: Vec<u32>,
    server_docs: Vec<Vec<u32>>,
    /// Per document: its static embedding, when `weights.dense` asks for them.
    vectors: Vec<crate::embed::Vector>,
    /// Per document, when the transformer tier reranks: its text, and its vector once computed.
    #[cfg(feature = "semantic-minilm")]
    texts: Vec<String>,
    #[cfg(feature = "semantic-minilm")]
    deep: Vec<std::sync::OnceLock<Vec<f32>>>,
    /// Where the transformer's tool vectors are kept across restarts, when the caller keeps
    /// them (`keep_deep_vectors_in`).
    #[cfg(feature = "semantic-minilm")]
    deep_cache: Option<std::sync::Arc<VectorCache>>,
    /// Per upstream: its name (the owner of its tools' cached vectors).
    #[cfg(feature = "semantic-minilm")]
    server_names: Vec<String>,
}

/// Each document's static embedding, from `cache` when it holds it.
fn static_vectors(
    m: &crate::embed::Model,
    docs: &[ToolDoc],
    cache: Option<&VectorCache>,
) -> Vec<crate::embed::Vector> {
    let Some(cache) = cache else {
        return docs.iter().map(|d| m.embed(&d.embed_text())).collect();
    };
    let texts: Vec<String> = docs.iter().map(ToolDoc::embed_text).collect();
    let refs: Vec<(&str, &str)> = docs
        .iter()
        .zip(&texts)
        .map(|(d, t)| (d.server.as_str(), t.as_str()))
        .collect();
    cache
        .vectors(&refs, |missing| {
            missing.iter().map(|t| m.embed(t).to_vec()).collect()
        })
        .into_iter()
        .map(|v| {
            let mut out = [0f32; crate::embed::DIM];
            if v.len() == out.len() {
                out.copy_from_slice(&v);
            }
            out
        })
        .collect()
}

fn tokenize(text: &str, analyze: bool) -> Vec<String> {
    if analyze {
        text::terms(text)
    } else {
        text::words(text)
    }
}

/// Each document's terms by field: the dictionary, the postings, the field lengths and their
/// averages.
struct Terms {
    lengths: Vec<[u32; FIELDS]>,
    avg: [f32; FIELDS],
    dict: Dict,
    postings: Vec<Vec<(u32, [u16; FIELDS])>>,
}

impl Terms {
    fn of(docs: &[ToolDoc], weights: &Weights) -> Terms {
        let mut lengths = Vec::with_capacity(docs.len());
        let mut dict = Dict::with_capacity_and_hasher(docs.len(), BuildHasherDefault::default());
        let mut postings: Vec<Vec<(u32, [u16; FIELDS])>> = Vec::new();
        let mut totals = [0f64; FIELDS];
        let mut seen: Vec<(u32, usize)> = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            let params = d.params.join(" ");
            let server = format!("{} {}", d.server, d.server_text);
            let single;
            let fields: [&str; FIELDS] = if weights.single_field {
                single = format!("{} {} {}", d.name, d.description, params);
                [&single, "", "", "", ""]
            } else {
                [&d.name, &d.description, &params, &d.param_text, &server]
            };
            seen.clear();
            let mut len = [0u32; FIELDS];
            for (f, text) in fields.iter().enumerate() {
                let mut add = |term: &str| {
                    let id = match dict.get(term) {
                        Some(id) => *id,
                        None => {
                            let id = dict.len() as u32;
                            dict.insert(term.to_string(), id);
                            postings.push(Vec::new());
                            id
                        }
                    };
                    seen.push((id, f));
                    len[f] += 1;
                };
                if weights.analyze {
                    text::each_term(text, &mut add);
                } else {
                    text::each_word(text, &mut add);
                }
                totals[f] += f64::from(len[f]);
            }
            // Per term of this document: counts by field.
            seen.sort_unstable();
            let mut k = 0;
            while k < seen.len() {
                let id = seen[k].0;
                let mut counts = [0u16; FIELDS];
                while k < seen.len() && seen[k].0 == id {
                    counts[seen[k].1] = counts[seen[k].1].saturating_add(1);
                    k += 1;
                }
                postings[id as usize].push((i as u32, counts));
            }
            lengths.push(len);
        }
        // Held until the next build: no room kept from growing (up to half of each).
        dict.shrink_to_fit();
        postings.iter_mut().for_each(Vec::shrink_to_fit);
        postings.shrink_to_fit();
        let n = docs.len().max(1) as f64;
        let avg = std::array::from_fn(|f| ((totals[f] / n) as f32).max(1.0));
        Terms {
            lengths,
            avg,
            dict,
            postings,
        }
    }
}

impl Index {
    pub fn build(docs: &[ToolDoc], weights: Weights) -> Self {
        Self::build_cached(docs, weights, None)
    }

    /// `build`, with the static embeddings taken from `cache` where it has them (and the ones
    /// it lacks added to it).
    pub fn build_cached(docs: &[ToolDoc], weights: Weights, cache: Option<&VectorCache>) -> Self {
        let Terms {
            lengths,
            avg,
            dict,
            postings,
        } = Terms::of(docs, &weights);
        let mut servers: HashMap<&str, u32> = HashMap::new();
        let mut server_docs: Vec<Vec<u32>> = Vec::new();
        #[cfg(feature = "semantic-minilm")]
        let mut server_names: Vec<String> = Vec::new();
        let server_of = docs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let next = servers.len() as u32;
                let id = *servers.entry(d.server.as_str()).or_insert(next);
                if id == next {
                    server_docs.push(Vec::new());
                    #[cfg(feature = "semantic-minilm")]
                    server_names.push(d.server.clone());
                }
                server_docs[id as usize].push(i as u32);
                id
            })
            .collect();
        #[cfg(feature = "semantic-minilm")]
        let weights_rerank = weights.rerank;
        let vectors = match crate::embed::model() {
            Some(m) if weights.dense > 0.0 => static_vectors(m, docs, cache),
            _ => Vec::new(),
        };
        Self {
            weights,
            lengths,
            avg,
            dict,
            postings,
            server_of,
            server_docs,
            vectors,
            #[cfg(feature = "semantic-minilm")]
            texts: if weights_rerank > 0.0 {
                docs.iter().map(ToolDoc::embed_text).collect()
            } else {
                Vec::new()
            },
            #[cfg(feature = "semantic-minilm")]
            deep: if weights_rerank > 0.0 {
                docs.iter().map(|_| std::sync::OnceLock::new()).collect()
            } else {
                Vec::new()
            },
            #[cfg(feature = "semantic-minilm")]
            deep_cache: None,
            #[cfg(feature = "semantic-minilm")]
            server_names,
        }
    }

    /// Keeps the transformer tier's tool vectors in `cache`: a tool's vector is read from it
    /// before it is computed, and added to it after, so a restart does not embed its tools
    /// again. The caller saves the cache.
    #[cfg(feature = "semantic-minilm")]
    pub fn keep_deep_vectors_in(&mut self, cache: std::sync::Arc<VectorCache>) {
        self.deep_cache = Some(cache);
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Raises the documents of the upstreams among the best matches by a share of that
    /// upstream's best score; documents that did not match themselves join the candidates that
    /// way. Only the leading upstreams take part: the others could not reach the top anyway.
    fn add_siblings(
        &self,
        scores: &mut [f32],
        mut touched: Vec<u32>,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<u32> {
        const LEADERS: usize = 10;
        let mut lead: Vec<u32> = touched
            .iter()
            .copied()
            .filter(|d| keep(*d as usize))
            .collect();
        if lead.len() > LEADERS {
            lead.select_nth_unstable_by(LEADERS - 1, |a, b| {
                scores[*b as usize].total_cmp(&scores[*a as usize])
            });
            lead.truncate(LEADERS);
        }
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(LEADERS);
        for d in lead {
            let s = self.server_of[d as usize];
            let score = scores[d as usize];
            match best.iter_mut().find(|b| b.0 == s) {
                Some(b) => b.1 = b.1.max(score),
                None => best.push((s, score)),
            }
        }
        for (s, top) in best {
            for d in &self.server_docs[s as usize] {
                if scores[*d as usize] == 0.0 && self.vectors.is_empty() {
                    touched.push(*d);
                }
                scores[*d as usize] += self.weights.sibling * top;
            }
        }
        touched
    }

    /// The best `limit` documents for `query`, best first; `keep` filters documents (e.g. one
    /// upstream, or what a profile may see).
    pub fn search(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Vec<Hit> {
        let mut terms: Vec<(String, f32)> = Vec::new();
        for t in tokenize(query, self.weights.analyze) {
            if self.weights.analyze {
                for r in text::related(&t) {
                    terms.push((r.to_string(), self.weights.related));
                }
            }
            terms.push((t, 1.0));
        }
        if self.weights.analyze {
            terms.extend(
                text::implied(query)
                    .into_iter()
                    .map(|(t, q)| (t, q * self.weights.implied)),
            );
        }
        // One entry per term, at its strongest weight.
        terms.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        terms.dedup_by(|a, b| a.0 == b.0);
        let n = self.lengths.len() as f32;
        let w = &self.weights;
        // (postings index, query weight, idf) of each query term the index knows.
        let qterms: Vec<(usize, f32, f32)> = terms
            .iter()
            .filter(|(_, q)| *q > 0.0)
            .filter_map(|(term, q)| {
                let id = *self.dict.get(term)? as usize;
                let df = self.postings[id].len() as f32;
                Some((id, *q, (1.0 + (n - df + 0.5) / (df + 0.5)).ln()))
            })
            .collect();
        let mut scores = vec![0f32; self.lengths.len()];
        let mut touched: Vec<u32> = Vec::new();
        self.accumulate(&qterms, &mut scores, &mut touched);
        if let Some(m) = crate::embed::model().filter(|_| !self.vectors.is_empty()) {
            // A request with no word the model knows (emoji, invisible characters) means
            // nothing to it: every tool would be as near as every other.
            let q = m.embed(query);
            if q.iter().any(|x| *x != 0.0) {
                touched = self.add_dense(&q, &mut scores, keep);
            }
        }
        if w.sibling > 0.0 {
            touched = self.add_siblings(&mut scores, touched, keep);
        }
        let mut hits: Vec<Hit> = touched
            .into_iter()
            .filter(|d| keep(*d as usize))
            .map(|doc| Hit {
                doc: doc as usize,
                score: scores[doc as usize],
            })
            .collect();
        let wanted = limit;
        let reranks = self.reranks();
        let limit = if reranks {
            limit.max(RERANK_DEPTH)
        } else {
            limit
        }
        .min(hits.len());
        if limit == 0 {
            return Vec::new();
        }
        hits.select_nth_unstable_by(limit - 1, |a, b| {
            b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc))
        });
        hits.truncate(limit);
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        if reranks {
            self.rerank(query, &mut hits);
        }
        hits.truncate(wanted);
        hits
    }

    /// Whether the best candidates are reranked by the transformer tier (a search then takes
    /// milliseconds: callers on an event loop run it as blocking work).
    pub fn reranks(&self) -> bool {
        #[cfg(feature = "semantic-minilm")]
        {
            self.weights.rerank > 0.0 && crate::minilm::loaded().is_some()
        }
        #[cfg(not(feature = "semantic-minilm"))]
        {
            false
        }
    }

    /// The best candidates again, by their score scaled to the best one plus the transformer's
    /// cosine (weighted). A tool's vector is computed the first time it is a candidate and kept.
    #[cfg(feature = "semantic-minilm")]
    fn rerank(&self, query: &str, hits: &mut [Hit]) {
        let Some(m) = crate::minilm::loaded() else {
            return;
        };
        let missing: Vec<usize> = hits
            .iter()
            .map(|h| h.doc)
            .filter(|d| self.deep[*d].get().is_none())
            .collect();
        // A tool may answer one step of a request of several: it is judged by the part of the
        // request it matches best (measured: R@1 up on all three data sets, docs/benchmarks.md).
        let mut texts = text::clauses(query);
        texts.push(query);
        let Ok(mut parts) = m.embed(&texts) else {
            return;
        };
        let Some(q) = parts.pop() else {
            return;
        };
        for (d, v) in missing.iter().zip(self.deep_vectors(m, &missing)) {
            // A vector that could not be computed is tried again next time.
            if v.iter().any(|x| *x != 0.0) {
                let _ = self.deep[*d].set(v);
            }
        }
        let best = hits.iter().map(|h| h.score).fold(f32::MIN, f32::max);
        let scale = if best > 0.0 { 1.0 / best } else { 1.0 };
        for h in hits.iter_mut() {
            let c = self.deep[h.doc].get().map_or(0.0, |v| {
                parts
                    .iter()
                    .map(|p| crate::minilm::cosine(p, v))
                    .fold(crate::minilm::cosine(&q, v), f32::max)
            });
            h.score = h.score * scale + self.weights.rerank * c;
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    }

    /// The transformer's vectors of `docs`, from the kept ones where they are.
    #[cfg(feature = "semantic-minilm")]
    fn deep_vectors(&self, m: &crate::minilm::MiniLm, docs: &[usize]) -> Vec<Vec<f32>> {
        let embed = |texts: &[&str]| m.embed(texts).unwrap_or_default();
        let Some(cache) = &self.deep_cache else {
            let texts: Vec<&str> = docs.iter().map(|d| self.texts[*d].as_str()).collect();
            return embed(&texts);
        };
        let pairs: Vec<(&str, &str)> = docs
            .iter()
            .map(|d| {
                let server = &self.server_names[self.server_of[*d] as usize];
                (server.as_str(), self.texts[*d].as_str())
            })
            .collect();
        cache
            .vectors(&pairs, embed)
            .into_iter()
            .map(Vec::from)
            .collect()
    }

    #[cfg(not(feature = "semantic-minilm"))]
    fn rerank(&self, _query: &str, _hits: &mut [Hit]) {}

    /// Every kept document gets the cosine of its embedding and the request's, weighted, on top
    /// of its BM25F score scaled to the best one: a tool that shares no word with the request
    /// can still rank by meaning, and words still decide between close meanings.
    fn add_dense(
        &self,
        q: &crate::embed::Vector,
        scores: &mut [f32],
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<u32> {
        let best = scores.iter().copied().fold(0f32, f32::max);
        let scale = if best > 0.0 { 1.0 / best } else { 0.0 };
        let mut all = Vec::with_capacity(scores.len());
        for (d, v) in self.vectors.iter().enumerate() {
            if keep(d) {
                scores[d] = scores[d] * scale + self.weights.dense * crate::embed::dot(q, v);
                all.push(d as u32);
            }
        }
        all
    }

    fn accumulate(&self, qterms: &[(usize, f32, f32)], scores: &mut [f32], touched: &mut Vec<u32>) {
        let k1 = self.weights.k1;
        for (id, qweight, idf) in qterms {
            for (doc, counts) in &self.postings[*id] {
                let tf = self.tf(*doc as usize, counts);
                if tf > 0.0 {
                    // Every contribution is positive (weights > 0 were filtered above), so a zero
                    // score means the document was not touched yet.
                    let d = *doc as usize;
                    if scores[d] == 0.0 {
                        touched.push(*doc);
                    }
                    scores[d] += qweight * idf * tf / (k1 + tf);
                }
            }
        }
    }

    /// BM25F term frequency of one posting: fields weighted and length-normalised, then summed.
    fn tf(&self, doc: usize, counts: &[u16; FIELDS]) -> f32 {
        let w = &self.weights;
        let len = &self.lengths[doc];
        let mut tf = 0.0;
        for f in 0..FIELDS {
            if counts[f] == 0 || w.field[f] == 0.0 {
                continue;
            }
            let norm = 1.0 - w.b[f] + w.b[f] * len[f] as f32 / self.avg[f];
            tf += w.field[f] * f32::from(counts[f]) / norm;
        }
        tf
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
