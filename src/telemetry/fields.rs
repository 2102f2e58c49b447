//! Small, panic-free splitters shared by the log parsers: top-level splitting
//! that respects brackets and quotes, Python tuple reprs, and `k=v` fields.

/// Splits `s` on `sep` where it is outside brackets `()[]{}` and quotes.
/// Unbalanced input never panics; a stray closer is treated as text.
pub fn split_top_level(s: &str, sep: impl Fn(char) -> bool) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth: usize = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        match ch {
            '\'' | '"' => quote = Some(ch),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            c if depth == 0 && sep(c) => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Byte index of the first `sep` outside brackets and quotes.
pub fn find_top_level(s: &str, sep: char) -> Option<usize> {
    let first = split_top_level(s, |c| c == sep).into_iter().next()?;
    (first.len() < s.len()).then_some(first.len())
}

/// Given `s` starting with an opening bracket, the byte index of its
/// matching closer (quotes respected), or `None` when unbalanced.
pub fn matching_close(s: &str) -> Option<usize> {
    let mut depth: usize = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, ch) in s.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        match ch {
            '\'' | '"' => quote = Some(ch),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parses a Python tuple or list repr of scalars: `('a', 'b')`, `('a',)`,
/// `()`, `[1, 2]`, `(1073741824, 536870912)`. Strings are unquoted and
/// unescaped; other elements are kept as trimmed text.
pub fn parse_python_tuple(s: &str) -> Option<Vec<String>> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| s.strip_prefix('[').and_then(|r| r.strip_suffix(']')))?;
    let mut out = Vec::new();
    for part in split_top_level(inner, |c| c == ',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        out.push(unquote_python(part)?);
    }
    Some(out)
}

/// Unquotes a Python string literal (`'x'` or `"x"`); other text is
/// returned as is. `None` for an unterminated literal.
pub fn unquote_python(s: &str) -> Option<String> {
    let mut chars = s.chars();
    let q = match chars.next() {
        Some(c @ ('\'' | '"')) => c,
        _ => return Some(s.to_string()),
    };
    if s.len() < 2 || !s.ends_with(q) {
        return None;
    }
    let body = &s[1..s.len() - 1];
    let mut out = String::with_capacity(body.len());
    let mut it = body.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Splits whitespace-separated `k=v` fields (values may hold bracketed
/// text with spaces, e.g. `pool_sizes_bytes=(1, 2)`). Tokens without `=`
/// are returned with an empty key.
pub fn kv_fields(s: &str) -> Vec<(&str, &str)> {
    split_top_level(s, char::is_whitespace)
        .into_iter()
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((k, v)) => (k, v),
            None => ("", t),
        })
        .collect()
}

/// Cuts `s` to at most `max` bytes on a char boundary, marking the cut.
pub fn excerpt(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_respect_brackets_and_quotes() {
        let s = "a:('x', 'y')_count=1, b:('1:kvcr',)=2, c='p, q'=3";
        let parts = split_top_level(s, |c| c == ',');
        assert_eq!(
            parts,
            vec!["a:('x', 'y')_count=1", " b:('1:kvcr',)=2", " c='p, q'=3"]
        );
    }

    #[test]
    fn tuples() {
        assert_eq!(
            parse_python_tuple("('remote_deliver', 'success')").unwrap(),
            vec!["remote_deliver", "success"]
        );
        assert_eq!(parse_python_tuple("('a',)").unwrap(), vec!["a"]);
        assert_eq!(parse_python_tuple("()").unwrap(), Vec::<String>::new());
        assert_eq!(parse_python_tuple("[1, 2]").unwrap(), vec!["1", "2"]);
        assert_eq!(parse_python_tuple("(\"it's\",)").unwrap(), vec!["it's"]);
        assert_eq!(parse_python_tuple("('a"), None);
    }

    #[test]
    fn fields() {
        let f = kv_fields("socket=/s guards=2 pool_sizes_bytes=(1, 2) journal_bytes=3");
        assert_eq!(
            f,
            vec![
                ("socket", "/s"),
                ("guards", "2"),
                ("pool_sizes_bytes", "(1, 2)"),
                ("journal_bytes", "3")
            ]
        );
    }

    #[test]
    fn matching() {
        assert_eq!(matching_close("('a)', 'b')x"), Some(10));
        assert_eq!(matching_close("(("), None);
        assert_eq!(matching_close(")"), None);
    }

    #[test]
    fn excerpt_is_char_safe() {
        let s = "ééééé";
        assert!(excerpt(s, 3).starts_with('é'));
    }
}
