//! The prompt set: deterministic token-id prompts built from a seed.
//!
//! Prompts are sent as token ids (OpenAI completions accept `prompt: [ids]`,
//! and so does Dynamo's frontend), so the harness knows exactly which full
//! blocks two prompts share. A *family* is one shared prefix of whole blocks
//! plus suffix variants shorter than a block: variant `j` of family `i` shares
//! exactly `prefix_blocks` full blocks with every other variant of family `i`
//! and none with any other family. Each family also has one *extended*
//! prompt: the prefix, one more full block of its own, then a suffix; a
//! request for it shares the prefix with the variants and has a full block
//! past it (TC-03's hint-membership check).
//!
//! Every case takes families it has never used before from the [`PromptBook`],
//! so no case can pass on blocks another case (or an earlier try) left behind.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Shape of the prompt set; part of the reference cache key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptShape {
    pub seed: u64,
    pub families: usize,
    pub variants: usize,
    pub prefix_blocks: u32,
    pub suffix_tokens: u32,
    pub block_size: u32,
    /// Token ids are drawn from `first_token..vocab_size` (below it: specials).
    pub first_token: u32,
    pub vocab_size: u32,
}

/// One prompt: family, variant, token ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    pub family: usize,
    pub variant: usize,
    pub tokens: Vec<u32>,
}

/// The `variant` number of a family's extended prompt (key `f012x`).
pub const EXTENDED_VARIANT: usize = 1000;

impl Prompt {
    /// A short stable name for evidence, e.g. `f012v1` (`f012x`: the
    /// extended prompt).
    pub fn key(&self) -> String {
        if self.family == usize::MAX {
            return format!("filler{}", self.variant);
        }
        if self.variant == EXTENDED_VARIANT {
            return format!("f{:03}x", self.family);
        }
        format!("f{:03}v{}", self.family, self.variant)
    }
}

/// A family of prompts sharing a block-aligned prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Family {
    pub index: usize,
    pub prefix_blocks: u32,
    pub variants: Vec<Prompt>,
    /// The prefix, one full block no other prompt has, then a suffix.
    pub extended: Prompt,
}

impl Family {
    pub fn variant(&self, j: usize) -> &Prompt {
        &self.variants[j % self.variants.len()]
    }

    /// Full blocks every two variants share.
    pub fn shared_blocks(&self) -> u64 {
        u64::from(self.prefix_blocks)
    }

    /// Every prompt the reference phase records: the variants in order,
    /// then the extended prompt.
    pub fn reference_prompts(&self) -> impl Iterator<Item = &Prompt> {
        self.variants.iter().chain(std::iter::once(&self.extended))
    }
}

/// Streams of a family's extended prompt: its extra block and its suffix
/// (variants use `1..=variants`).
const EXTENSION_STREAM: u64 = 0xE0;
const EXTENSION_SUFFIX_STREAM: u64 = 0xE1;

/// splitmix64: small, fast, and the same on every platform.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn tokens(shape: &PromptShape, stream: u64, count: u32) -> Vec<u32> {
    let mut state = shape.seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407);
    let span = u64::from(shape.vocab_size.saturating_sub(shape.first_token).max(1));
    (0..count)
        .map(|_| shape.first_token + (splitmix(&mut state) % span) as u32)
        .collect()
}

/// The whole prompt set of a shape.
pub fn families(shape: &PromptShape) -> Vec<Family> {
    (0..shape.families)
        .map(|i| {
            let prefix = tokens(
                shape,
                (i as u64) << 8,
                shape.prefix_blocks * shape.block_size,
            );
            let variants = (0..shape.variants)
                .map(|j| {
                    let mut t = prefix.clone();
                    t.extend(tokens(
                        shape,
                        ((i as u64) << 8) | (j as u64 + 1),
                        shape.suffix_tokens,
                    ));
                    Prompt {
                        family: i,
                        variant: j,
                        tokens: t,
                    }
                })
                .collect();
            let mut extended = prefix.clone();
            extended.extend(tokens(
                shape,
                ((i as u64) << 8) | EXTENSION_STREAM,
                shape.block_size,
            ));
            extended.extend(tokens(
                shape,
                ((i as u64) << 8) | EXTENSION_SUFFIX_STREAM,
                shape.suffix_tokens,
            ));
            Family {
                index: i,
                prefix_blocks: shape.prefix_blocks,
                variants,
                extended: Prompt {
                    family: i,
                    variant: EXTENDED_VARIANT,
                    tokens: extended,
                },
            }
        })
        .collect()
}

/// Filler prompts: whole-block prompts outside the prompt set (no reference
/// tokens needed), used to push blocks out of a device cache. `salt` keeps
/// two evictions of one run from sending the same fillers.
pub fn fillers(shape: &PromptShape, salt: u64, count: usize) -> Vec<Prompt> {
    (0..count)
        .map(|i| Prompt {
            family: usize::MAX,
            variant: i,
            tokens: tokens(
                shape,
                FILLER_STREAM ^ (salt << 20) ^ i as u64,
                (shape.prefix_blocks + 1) * shape.block_size,
            ),
        })
        .collect()
}

/// Filler streams live far from family streams (`family << 8`).
const FILLER_STREAM: u64 = 1 << 62;

/// A digest of the prompt set, for the reference cache key.
pub fn digest(shape: &PromptShape) -> String {
    let mut h = Sha256::new();
    for f in families(shape) {
        for p in f.reference_prompts() {
            for t in &p.tokens {
                h.update(t.to_le_bytes());
            }
            h.update(b"|");
        }
    }
    hex::encode(h.finalize())
}

/// Hands out families, each at most once per run.
pub struct PromptBook {
    shape: PromptShape,
    families: Vec<Family>,
    next: AtomicUsize,
    filler_batches: AtomicUsize,
    /// A cursor file shared by every run against one stack (attach mode),
    /// so no run reuses a family another run committed.
    shared_cursor: std::sync::Mutex<Option<std::path::PathBuf>>,
}

#[derive(Debug, thiserror::Error)]
#[error("the prompt set has no unused family left for {who} ({total} families in all, shared by every run on this stack); raise prompts.families in the profile, or restart an attached stack")]
pub struct OutOfPrompts {
    pub who: String,
    pub total: usize,
}

impl PromptBook {
    pub fn new(shape: PromptShape) -> Self {
        Self {
            families: families(&shape),
            shape,
            next: AtomicUsize::new(0),
            filler_batches: AtomicUsize::new(0),
            shared_cursor: std::sync::Mutex::new(None),
        }
    }

    /// From now on, take families through the cursor file at `path`
    /// (created if missing), shared with every other run on the same stack.
    pub fn share_cursor(&self, path: &std::path::Path) {
        if let Ok(mut cursor) = self.shared_cursor.lock() {
            *cursor = Some(path.to_path_buf());
        }
    }

    /// The next unused family index: from the shared cursor when there is
    /// one, else from this run's counter.
    fn next_index(&self) -> usize {
        let path = self.shared_cursor.lock().ok().and_then(|c| c.clone());
        match path.and_then(|p| advance_cursor(&p).ok()) {
            Some(i) => i,
            None => self.next.fetch_add(1, Ordering::SeqCst),
        }
    }

    pub fn all(&self) -> &[Family] {
        &self.families
    }

    /// A family no one has used in this run.
    pub fn take(&self, who: &str) -> Result<Family, OutOfPrompts> {
        let i = self.next_index();
        self.families.get(i).cloned().ok_or_else(|| OutOfPrompts {
            who: who.into(),
            total: self.families.len(),
        })
    }

    /// `n` unused families.
    pub fn take_many(&self, who: &str, n: usize) -> Result<Vec<Family>, OutOfPrompts> {
        (0..n).map(|_| self.take(who)).collect()
    }

    /// Fresh filler prompts (see [`fillers`]).
    pub fn fillers(&self, count: usize) -> Vec<Prompt> {
        let salt = self.filler_batches.fetch_add(1, Ordering::SeqCst) as u64;
        fillers(&self.shape, salt, count)
    }

    /// How many families are still unused.
    pub fn remaining(&self) -> usize {
        self.families
            .len()
            .saturating_sub(self.next.load(Ordering::SeqCst))
    }
}

/// Reads and increments the counter in `path` under an exclusive lock.
fn advance_cursor(path: &std::path::Path) -> std::io::Result<usize> {
    use std::io::{Read, Seek, Write};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    let mut file = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| std::io::Error::from(errno))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let current: usize = text.trim().parse().unwrap_or(0);
    file.seek(std::io::SeekFrom::Start(0))?;
    file.set_len(0)?;
    write!(file, "{}", current + 1)?;
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> PromptShape {
        PromptShape {
            seed: 7,
            families: 5,
            variants: 3,
            prefix_blocks: 4,
            suffix_tokens: 8,
            block_size: 16,
            first_token: 3,
            vocab_size: 512,
        }
    }

    #[test]
    fn variants_share_exactly_the_prefix_blocks() {
        let fams = families(&shape());
        let f = &fams[2];
        let (a, b) = (&f.variants[0].tokens, &f.variants[1].tokens);
        assert_eq!(a.len(), 4 * 16 + 8);
        assert_eq!(a[..64], b[..64]);
        assert_ne!(a[64..], b[64..]);
        // Different families share no first block.
        assert_ne!(
            fams[0].variants[0].tokens[..16],
            fams[1].variants[0].tokens[..16]
        );
    }

    #[test]
    fn the_extended_prompt_has_one_full_block_past_the_prefix() {
        let fams = families(&shape());
        let f = &fams[2];
        let x = &f.extended.tokens;
        assert_eq!(x.len(), (4 + 1) * 16 + 8);
        assert_eq!(x[..64], f.variants[1].tokens[..64]);
        // Its fifth block is its own: no variant's suffix starts it.
        for v in &f.variants {
            assert_ne!(x[64..72], v.tokens[64..72]);
        }
        assert_eq!(f.extended.key(), "f002x");
        let keys: Vec<String> = f.reference_prompts().map(Prompt::key).collect();
        assert_eq!(keys, ["f002v0", "f002v1", "f002v2", "f002x"]);
    }

    #[test]
    fn deterministic_and_in_vocab() {
        assert_eq!(families(&shape()), families(&shape()));
        assert_eq!(digest(&shape()), digest(&shape()));
        let mut other = shape();
        other.seed = 8;
        assert_ne!(digest(&shape()), digest(&other));
        assert!(families(&shape())
            .iter()
            .flat_map(|f| f.variants.iter().flat_map(|p| p.tokens.iter()))
            .all(|t| (3..512).contains(t)));
    }

    #[test]
    fn book_hands_out_each_family_once() {
        let book = PromptBook::new(shape());
        let (f1, f2) = (book.fillers(2), book.fillers(2));
        assert_ne!(f1[0].tokens[..16], f2[0].tokens[..16]);
        assert_eq!(f1[0].tokens.len(), 5 * 16);
        let got: Vec<usize> = book
            .take_many("t", 5)
            .unwrap()
            .iter()
            .map(|f| f.index)
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        let err = book.take("TC-09").unwrap_err();
        assert!(err.to_string().contains("TC-09"));
    }

    #[test]
    fn runs_sharing_a_cursor_never_take_the_same_family() {
        let dir = tempfile::tempdir().unwrap();
        let cursor = dir.path().join("cursor");
        let (first, second) = (PromptBook::new(shape()), PromptBook::new(shape()));
        first.share_cursor(&cursor);
        second.share_cursor(&cursor);
        let a = first.take("run 1").unwrap().index;
        let b = second.take("run 2").unwrap().index;
        let c = first.take("run 1").unwrap().index;
        assert_eq!((a, b, c), (0, 1, 2));
    }
}
