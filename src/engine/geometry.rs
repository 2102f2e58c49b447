//! The KV page layout of a block: which layout a run asks for
//! ([`GeometryKind`], `--geometry`), and the pages an engine's block has
//! ([`Geometry`]), which the harness checks transfers against.

use serde::Serialize;

crate::words::word_enum!(
    /// The KV page layout a run asks for (`--geometry`). The CPU engine
    /// builds either; the GPU engines' blocks are what their model has.
    GeometryKind, "geometry" {
        /// Attention pages only.
        Dense = "dense",
        /// Attention pages plus SSM state parts.
        Hybrid = "hybrid",
    }
);

/// Page geometry of one KV block, as the harness checks transfers against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Geometry {
    pub name: String,
    pub block_size_tokens: u32,
    /// `(label, bytes)` of every page of one block, e.g. 2 × attn + 3 × ssm parts.
    pub pages: Vec<(String, u64)>,
}

impl Geometry {
    /// One KV page kind (`attn`) of `block_bytes` per block: what the GPU
    /// engines' adapters move (one unnamed pool per Guard, so the Guard
    /// gets one pool size).
    pub fn dense(block_size_tokens: u32, block_bytes: u64) -> Self {
        Self {
            name: GeometryKind::Dense.as_str().into(),
            block_size_tokens,
            pages: vec![("attn".into(), block_bytes)],
        }
    }

    pub fn pages_per_block(&self) -> u64 {
        self.pages.len() as u64
    }

    pub fn bytes_per_block(&self) -> u64 {
        self.pages.iter().map(|(_, bytes)| bytes).sum()
    }

    /// The distinct page kinds (`attn`, `ssm`: a label's part before `:`),
    /// in first-seen order: one Guard pool each, in the order of KVCR's
    /// `pool_layouts`.
    pub fn pool_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = Vec::new();
        for (label, _) in &self.pages {
            let kind = label.split(':').next().unwrap_or(label).to_string();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// Pages of one kind (`attn`, `ssm`: a label's part before `:`) in a block.
    pub fn pages_of_kind(&self, kind: &str) -> u64 {
        self.pages
            .iter()
            .filter(|(label, _)| label.split(':').next() == Some(kind))
            .count() as u64
    }

    /// Full blocks in a prompt of `tokens` tokens.
    pub fn full_blocks(&self, tokens: u64) -> u64 {
        tokens / u64::from(self.block_size_tokens)
    }

    /// Blocks that hold a prompt of `tokens` tokens, the partial last one
    /// included.
    pub fn blocks_holding(&self, tokens: u64) -> u64 {
        tokens.div_ceil(u64::from(self.block_size_tokens).max(1))
    }
}
