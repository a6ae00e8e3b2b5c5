//! BM25F over tool documents. Each field (name parts, description, parameter names, parameter
//! descriptions, upstream text) has its own weight and length normalisation; term frequencies
//! are combined across fields before saturation, so a word found in the name and the
//! description counts once, strongly, instead of twice. The upstream's own name is a field of
//! low weight, so a query naming an upstream helps without drowning everything else in that
//! upstream's tools.

use std::collections::HashMap;

use crate::doc::ToolDoc;
use crate::text;

pub const FIELDS: usize = 5;

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
    postings: HashMap<String, Vec<(u32, [u16; FIELDS])>>,
}

fn tokenize(text: &str, analyze: bool) -> Vec<String> {
    if analyze {
        text::terms(text)
    } else {
        text::words(text)
    }
}

impl Index {
    pub fn build(docs: &[ToolDoc], weights: Weights) -> Self {
        let mut lengths = Vec::with_capacity(docs.len());
        let mut postings: HashMap<String, Vec<(u32, [u16; FIELDS])>> = HashMap::new();
        let mut totals = [0f64; FIELDS];
        for (i, d) in docs.iter().enumerate() {
            let fields: [String; FIELDS] = if weights.single_field {
                [
                    format!("{} {} {}", d.name, d.description, d.params.join(" ")),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]
            } else {
                [
                    d.name.clone(),
                    d.description.clone(),
                    d.params.join(" "),
                    d.param_text.clone(),
                    format!("{} {}", d.server, d.server_text),
                ]
            };
            let mut tf: HashMap<String, [u16; FIELDS]> = HashMap::new();
            let mut len = [0u32; FIELDS];
            for (f, text) in fields.iter().enumerate() {
                for term in tokenize(text, weights.analyze) {
                    let slot = tf.entry(term).or_insert([0; FIELDS]);
                    slot[f] = slot[f].saturating_add(1);
                    len[f] += 1;
                }
                totals[f] += f64::from(len[f]);
            }
            for (term, counts) in tf {
                postings.entry(term).or_default().push((i as u32, counts));
            }
            lengths.push(len);
        }
        let n = docs.len().max(1) as f64;
        let avg = std::array::from_fn(|f| ((totals[f] / n) as f32).max(1.0));
        Self {
            weights,
            lengths,
            avg,
            postings,
        }
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The best `limit` documents for `query`, best first; `keep` filters documents (e.g. one
    /// upstream, or what a profile may see).
    pub fn search(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Vec<Hit> {
        let mut terms = tokenize(query, self.weights.analyze);
        terms.sort();
        terms.dedup();
        let n = self.lengths.len() as f32;
        let w = &self.weights;
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for term in &terms {
            let Some(list) = self.postings.get(term) else {
                continue;
            };
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (doc, counts) in list {
                let len = &self.lengths[*doc as usize];
                let mut tf = 0.0;
                for f in 0..FIELDS {
                    if counts[f] == 0 || w.field[f] == 0.0 {
                        continue;
                    }
                    let norm = 1.0 - w.b[f] + w.b[f] * len[f] as f32 / self.avg[f];
                    tf += w.field[f] * f32::from(counts[f]) / norm;
                }
                if tf > 0.0 {
                    *scores.entry(*doc).or_insert(0.0) += idf * tf / (w.k1 + tf);
                }
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .filter(|(d, _)| keep(*d as usize))
            .map(|(doc, score)| Hit {
                doc: doc as usize,
                score,
            })
            .collect();
        let limit = limit.min(hits.len());
        if limit == 0 {
            return Vec::new();
        }
        hits.select_nth_unstable_by(limit - 1, |a, b| {
            b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc))
        });
        hits.truncate(limit);
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(server: &str, name: &str, description: &str, params: &[&str]) -> ToolDoc {
        ToolDoc {
            id: format!("{server}.{name}"),
            server: server.into(),
            name: name.into(),
            description: description.into(),
            params: params.iter().map(|p| p.to_string()).collect(),
            param_text: String::new(),
            server_text: String::new(),
        }
    }

    #[test]
    fn finds_by_name_parts_and_description() {
        let docs = vec![
            doc("fs", "read_text_file", "Read a file as text", &["path"]),
            doc(
                "fs",
                "list_directory",
                "List entries of a directory",
                &["path"],
            ),
            doc(
                "time",
                "get_current_time",
                "Current time in a timezone",
                &["timezone"],
            ),
        ];
        let index = Index::build(&docs, Weights::broker());
        let hits = index.search("what time is it in Paris timezone", 3, &|_| true);
        assert_eq!(hits[0].doc, 2);
        let hits = index.search("show the files in a folder directory", 3, &|_| true);
        assert_eq!(hits[0].doc, 1);
        let hits = index.search("readTextFile", 3, &|_| true);
        assert_eq!(hits[0].doc, 0);
        let only_fs = index.search("time file directory", 5, &|d| docs[d].server == "fs");
        assert!(only_fs.iter().all(|h| docs[h.doc].server == "fs"));
    }

    #[test]
    fn an_upstream_name_does_not_drown_better_matches() {
        let mut docs = vec![doc(
            "github",
            "search_repositories",
            "Search GitHub repositories",
            &["query"],
        )];
        for i in 0..20 {
            docs.push(doc(
                "github",
                &format!("tool_{i}"),
                "Does something with github",
                &[],
            ));
        }
        docs.push(doc(
            "web",
            "fetch_url",
            "Fetch a URL and return its content",
            &["url"],
        ));
        let index = Index::build(&docs, Weights::broker());
        let hits = index.search("fetch the content of a url from github", 3, &|_| true);
        assert_eq!(docs[hits[0].doc].name, "fetch_url");
    }
}
