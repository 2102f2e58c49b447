//! Block ids to token ids: each id becomes the same `block_size` tokens
//! wherever it appears, so requests that share leading ids send prompts
//! that share exactly those leading blocks, to the engine's prefix cache
//! and to the router alike.

use std::ops::Range;

use super::trace::TraceRequest;

/// How a trace's block ids become token ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpace {
    block_size: u32,
    vocab: Range<u32>,
    salt: u64,
}

impl TokenSpace {
    /// Blocks of `block_size` tokens (the trace's block size) drawn from
    /// `vocab` (the engine's ordinary token ids, `Engine::prompt_vocab`).
    /// `salt` picks another set of tokens for the same ids: two replays of
    /// one trace under different salts share no block, so the second finds
    /// nothing the first left in a cache; the same salt gives the same
    /// prompts (what the reference run and the replay must agree on).
    ///
    /// Panics when `block_size` is 0 or `vocab` is empty.
    pub fn new(block_size: u32, vocab: Range<u32>, salt: u64) -> Self {
        assert!(block_size > 0, "a block has at least one token");
        assert!(!vocab.is_empty(), "an empty vocabulary {vocab:?}");
        TokenSpace {
            block_size,
            vocab,
            salt,
        }
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// The tokens of block `id`: a function of the id, the block size,
    /// the vocabulary and the salt only.
    pub fn block(&self, id: u64) -> Vec<u32> {
        let mut state =
            (id ^ self.salt.rotate_left(32)).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ self.salt;
        let span = u64::from(self.vocab.end - self.vocab.start);
        (0..self.block_size)
            .map(|_| self.vocab.start + (next(&mut state) % span) as u32)
            .collect()
    }

    /// The request's prompt: its blocks' tokens in order, the last block cut
    /// so the prompt is `input_length` tokens long.
    pub fn prompt(&self, request: &TraceRequest) -> Vec<u32> {
        let mut tokens: Vec<u32> = request
            .hash_ids
            .iter()
            .flat_map(|&id| self.block(id))
            .collect();
        tokens.truncate(request.input_length as usize);
        tokens
    }
}

/// splitmix64's step.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(input_length: u64, hash_ids: &[u64]) -> TraceRequest {
        TraceRequest {
            timestamp: 0,
            input_length,
            output_length: 1,
            hash_ids: hash_ids.to_vec(),
        }
    }

    /// The CPU engine's vocabulary (tiny model: 426 ids, 0..3 special).
    fn cpu() -> TokenSpace {
        TokenSpace::new(16, 3..426, 0)
    }

    #[test]
    fn requests_sharing_k_leading_ids_share_exactly_k_blocks() {
        let space = cpu();
        for k in 0..4u64 {
            let shared: Vec<u64> = (0..k).collect();
            let a = [shared.clone(), vec![100, 101]].concat();
            let b = [shared, vec![200, 201]].concat();
            let len = (k + 2) * 16;
            let (a, b) = (
                space.prompt(&request(len, &a)),
                space.prompt(&request(len, &b)),
            );
            let cut = (k * 16) as usize;
            assert_eq!(a[..cut], b[..cut], "k = {k}");
            // They differ in the block right after, and in every later one.
            for block in (cut..len as usize).step_by(16) {
                assert_ne!(a[block..block + 16], b[block..block + 16], "k = {k}");
            }
        }
    }

    #[test]
    fn the_last_block_is_cut_to_input_length() {
        let space = cpu();
        let full = space.prompt(&request(48, &[7, 8, 9]));
        let cut = space.prompt(&request(37, &[7, 8, 9]));
        assert_eq!((full.len(), cut.len()), (48, 37));
        assert_eq!(full[..37], cut[..]);
        assert_eq!(full[32..], space.block(9)[..]);
    }

    #[test]
    fn an_id_is_the_same_tokens_anywhere_and_only_its_own() {
        let space = cpu();
        assert_eq!(space.block(42), cpu().block(42));
        assert_eq!(space.block(42).len(), 16);
        assert_ne!(space.block(42), space.block(43));
        let p = space.prompt(&request(32, &[3, 42]));
        assert_eq!(p[16..], space.block(42)[..]);
        // Another salt, other tokens for the same id.
        assert_ne!(TokenSpace::new(16, 3..426, 1).block(42), space.block(42));
        // Other block sizes draw the same stream, longer or shorter.
        assert_eq!(
            TokenSpace::new(64, 3..426, 0).block(42)[..16],
            space.block(42)[..]
        );
    }

    #[test]
    fn tokens_stay_in_the_vocabulary() {
        for vocab in [3..426, 0..151_643, 10..11] {
            let space = TokenSpace::new(64, vocab.clone(), 9);
            for id in 0..200 {
                assert!(space.block(id).iter().all(|t| vocab.contains(t)));
            }
        }
        // A vocabulary this small still spreads over it.
        let mut seen = std::collections::BTreeSet::new();
        for id in 0..50 {
            seen.extend(TokenSpace::new(16, 3..13, 0).block(id));
        }
        assert_eq!(seen.len(), 10);
    }

    #[test]
    #[should_panic(expected = "empty vocabulary")]
    fn an_empty_vocabulary_is_refused() {
        TokenSpace::new(16, 5..5, 0);
    }
}
