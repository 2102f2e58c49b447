//! Guard pools sized in blocks: the exact GB figure `kvcr_service` takes for
//! N blocks of a geometry, and the blocks its `ready` line's pool sizes hold.
//!
//! `--pool-sizes-gb` is parsed as a decimal and rounded down to memory pages
//! (kvcr 0.1.1 `kvcr_service._parse_pool_sizes_gb`); a byte count over 2^30
//! is always a finite decimal (a power of two in the denominator), so the
//! figure written here parses back to exactly the bytes asked for.

use super::Geometry;

const PAGE: u64 = 4096;
const GB_SHIFT: u32 = 30;

/// Bytes of each Guard pool (one per page kind, in KVCR's `pool_layouts`
/// order) that hold `blocks` blocks of `geometry`, rounded up to pages.
pub fn pool_bytes_for_blocks(geometry: &Geometry, blocks: u64) -> Vec<u64> {
    geometry
        .pool_kinds()
        .iter()
        .map(|kind| {
            let per_block: u64 = geometry
                .pages
                .iter()
                .filter(|(label, _)| label.split(':').next() == Some(kind.as_str()))
                .map(|(_, bytes)| bytes)
                .sum();
            (blocks * per_block).div_ceil(PAGE) * PAGE
        })
        .collect()
}

/// `bytes` as the exact decimal GB figure (`65536` → `0.00006103515625`).
pub fn exact_gb(bytes: u64) -> String {
    let whole = bytes >> GB_SHIFT;
    let rest = u128::from(bytes & ((1 << GB_SHIFT) - 1));
    if rest == 0 {
        return whole.to_string();
    }
    // rest / 2^30 = rest * 5^30 / 10^30: 30 decimal digits, trailing zeros cut.
    let digits = format!("{:030}", rest * 5u128.pow(GB_SHIFT));
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// `--pool-sizes-gb` of a Guard, one figure per pool kind: the exact figure
/// that holds `blocks` when pools are sized in blocks, else `gb` each.
pub fn guard_pool_sizes(geometry: &Geometry, blocks: Option<u32>, gb: f64) -> Vec<String> {
    match blocks {
        Some(blocks) => pool_bytes_for_blocks(geometry, u64::from(blocks))
            .into_iter()
            .map(exact_gb)
            .collect(),
        None => vec![format!("{gb}"); geometry.pool_kinds().len()],
    }
}

/// Blocks of `geometry` each pool of a `ready` line's `pool_sizes_bytes`
/// holds (a pool of kind K holds `bytes / (pages of K × their size)`).
pub fn blocks_in_pools(geometry: &Geometry, pool_sizes_bytes: &[u64]) -> Vec<u64> {
    let per_block: Vec<u64> = geometry
        .pool_kinds()
        .iter()
        .map(|kind| {
            geometry
                .pages
                .iter()
                .filter(|(label, _)| label.split(':').next() == Some(kind.as_str()))
                .map(|(_, bytes)| bytes)
                .sum()
        })
        .collect();
    pool_sizes_bytes
        .iter()
        .zip(per_block)
        .map(|(size, per_block)| size.checked_div(per_block).unwrap_or(0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(pages: usize, bytes: u64) -> Geometry {
        Geometry {
            name: "dense".into(),
            block_size_tokens: 16,
            pages: vec![("kv".into(), bytes); pages],
        }
    }

    fn hybrid() -> Geometry {
        Geometry {
            name: "hybrid".into(),
            block_size_tokens: 16,
            pages: vec![
                ("attn".into(), 4096),
                ("attn".into(), 4096),
                ("ssm:conv".into(), 2048),
                ("ssm:temporal".into(), 2048),
                ("ssm:x".into(), 2048),
            ],
        }
    }

    #[test]
    fn exact_gb_parses_back_to_the_bytes() {
        assert_eq!(exact_gb(65536), "0.00006103515625");
        assert_eq!(exact_gb(1 << 30), "1");
        assert_eq!(exact_gb(3 << 29), "1.5");
        assert_eq!(exact_gb(4096), "0.000003814697265625");
        // Through a decimal: bytes = figure × 2^30 exactly.
        let figure: f64 = exact_gb(12 * 8192).parse().unwrap();
        assert_eq!((figure * f64::from(1u32 << 30)) as u64, 12 * 8192);
    }

    #[test]
    fn pools_hold_the_blocks_asked_for() {
        let g = dense(2, 4096);
        assert_eq!(pool_bytes_for_blocks(&g, 12), vec![12 * 8192]);
        assert_eq!(blocks_in_pools(&g, &[12 * 8192]), vec![12]);
        let h = hybrid();
        // attn: 2 × 4096 per block; ssm: 3 × 2048 = 6144, rounded up to pages.
        assert_eq!(pool_bytes_for_blocks(&h, 3), vec![3 * 8192, 20480]);
        assert_eq!(blocks_in_pools(&h, &[3 * 8192, 20480]), vec![3, 3]);
    }
}
