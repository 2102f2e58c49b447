//! Log lines as text: Dynamo's logs colour their fields with ANSI escapes.

/// `line` without ANSI escape sequences (the colours of Dynamo's logs).
/// Copies the text between escapes whole: logs run to megabytes, and a
/// char-by-char copy took seconds in a debug build.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find('\u{1b}') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        rest = match after.strip_prefix('[') {
            // Skip to the sequence's final letter, inclusive.
            Some(seq) => match seq.find(|c: char| c.is_ascii_alphabetic()) {
                Some(end) => &seq[end + 1..],
                None => "",
            },
            None => {
                out.push('\u{1b}');
                after
            }
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_and_a_lone_escape_is_kept() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026\u{1b}[0m a \u{1b}[1;32mb\u{1b}[0m"),
            "2026 a b"
        );
        assert_eq!(strip_ansi("x\u{1b}y"), "x\u{1b}y");
        assert_eq!(strip_ansi("cut \u{1b}[3"), "cut ");
        assert_eq!(strip_ansi("plain"), "plain");
    }
}
