//! Generated tokens against the reference engine's.

use super::Violation;

/// The clause: the tokens equal the reference engine's.
pub const CLAIM: &str = "reference tokens";

/// Tokens equal the reference, position by position and in length.
pub fn expect_reference_tokens(reference: &[u32], got: &[u32]) -> Result<(), Violation> {
    if let Some(pos) = reference.iter().zip(got).position(|(r, g)| r != g) {
        return Err(Violation {
            claim: CLAIM,
            detail: format!(
                "token {pos} of {} differs: expected {}, got {} (expected {:?}, got {:?})",
                reference.len(),
                reference[pos],
                got[pos],
                reference,
                got
            ),
        });
    }
    if reference.len() != got.len() {
        return Err(Violation {
            claim: CLAIM,
            detail: format!(
                "expected {} tokens, got {} (expected {reference:?}, got {got:?})",
                reference.len(),
                got.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_tokens_pass() {
        assert!(expect_reference_tokens(&[1, 2, 3], &[1, 2, 3]).is_ok());
    }

    #[test]
    fn a_wrong_token_names_its_position() {
        let v = expect_reference_tokens(&[1, 2, 3], &[1, 9, 3]).unwrap_err();
        assert!(
            v.to_string()
                .contains("token 1 of 3 differs: expected 2, got 9"),
            "{v}"
        );
    }

    #[test]
    fn a_short_answer_fails() {
        let v = expect_reference_tokens(&[1, 2, 3], &[1, 2]).unwrap_err();
        assert!(v.to_string().contains("expected 3 tokens, got 2"), "{v}");
    }
}
