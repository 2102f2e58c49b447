//! Prometheus text exposition (format 0.0.4, with OpenMetrics leniency)
//! parsed into samples. Never panics: a malformed line becomes a
//! [`ParseProblem`] and parsing goes on with the next line.

use std::collections::BTreeMap;

use super::problem::ParseProblem;

/// One sample line: `name{labels} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sample name (e.g. `vllm:kvcr_transfer_blocks_total`).
    pub name: String,
    /// Labels in the order written, unescaped.
    pub labels: Labels,
    /// Value; `+Inf`, `-Inf` and `NaN` are allowed.
    pub value: f64,
    /// Optional timestamp in milliseconds.
    pub timestamp_ms: Option<i64>,
    /// The line it was read from (1-based), and its text.
    pub line: usize,
    /// The sample as written (cut to a problem excerpt when reported).
    pub text: String,
}

impl Sample {
    /// The value of label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed exposition: samples, declared types and help, and problems.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Samples in order of appearance.
    pub samples: Vec<Sample>,
    /// `# TYPE` declarations: family name → type.
    pub types: BTreeMap<String, String>,
    /// `# HELP` declarations: family name → help text.
    pub help: BTreeMap<String, String>,
    /// Lines that could not be read.
    pub problems: Vec<ParseProblem>,
}

/// Parses a whole exposition text.
pub fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            parse_comment(comment, &mut out);
            continue;
        }
        match parse_sample(line) {
            Ok(mut s) => {
                s.line = i + 1;
                s.text = line.to_string();
                out.samples.push(s)
            }
            Err(reason) => {
                out.problems
                    .push(ParseProblem::new(format!("line {}", i + 1), reason, raw))
            }
        }
    }
    out
}

fn parse_comment(comment: &str, out: &mut Exposition) {
    let mut parts = comment.trim_start().splitn(3, ' ');
    let kind = parts.next().unwrap_or("");
    let name = parts.next().unwrap_or("").to_string();
    let rest = parts.next().unwrap_or("").trim().to_string();
    if name.is_empty() {
        return;
    }
    match kind {
        "TYPE" => {
            out.types.insert(name, rest);
        }
        "HELP" => {
            out.help.insert(name, rest);
        }
        _ => {}
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Parses a value: a float, or `+Inf`/`-Inf`/`Inf`/`NaN` in any case.
pub fn parse_value(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "+inf" | "inf" | "+infinity" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => {
            // Reject Rust-only spellings that are not Prometheus values.
            if s.is_empty()
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
            {
                return None;
            }
            s.parse::<f64>().ok()
        }
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .char_indices()
        .find(|&(i, c)| {
            !(if i == 0 {
                is_name_start(c)
            } else {
                is_name_char(c)
            })
        })
        .map(|(i, _)| i)
        .unwrap_or(line.len());
    if name_end == 0 {
        return Err("expected a metric name at the start of the line".into());
    }
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    if !rest.starts_with(|c: char| c.is_whitespace()) {
        return Err(format!(
            "expected whitespace then a value after `{name}`, saw {:?}",
            rest.chars().take(20).collect::<String>()
        ));
    }
    // Drop an OpenMetrics exemplar (` # {...} v`) or any trailing comment.
    let rest = match rest.find(" #") {
        Some(i) => &rest[..i],
        None => rest,
    };
    let mut fields = rest.split_whitespace();
    let value_text = fields.next().ok_or("expected a value, saw nothing")?;
    let value =
        parse_value(value_text).ok_or_else(|| format!("value {value_text:?} is not a number"))?;
    let timestamp_ms = match fields.next() {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .ok()
                .or_else(|| t.parse::<f64>().ok().map(|f| (f * 1000.0) as i64))
                .ok_or_else(|| format!("timestamp {t:?} is not a number"))?,
        ),
    };
    if let Some(extra) = fields.next() {
        return Err(format!(
            "unexpected text {extra:?} after value and timestamp"
        ));
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
        line: 0,
        text: String::new(),
    })
}

/// Parses `k="v",k2="v2"}` (after the `{`); returns labels and the text
/// after the closing brace.
/// Labels as written, unescaped.
pub type Labels = Vec<(String, String)>;

fn parse_labels(s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let name_end = rest
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        if name_end == 0 {
            return Err(format!(
                "expected a label name or `}}`, saw {:?}",
                rest.chars().take(20).collect::<String>()
            ));
        }
        let key = rest[..name_end].to_string();
        rest = rest[name_end..].trim_start();
        rest = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("expected `=` after label `{key}`"))?
            .trim_start();
        rest = rest
            .strip_prefix('"')
            .ok_or_else(|| format!("expected `\"` to open the value of label `{key}`"))?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let mut closed_at = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => break,
                },
                '"' => {
                    closed_at = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = closed_at.ok_or_else(|| format!("value of label `{key}` is not closed"))?;
        rest = &rest[end + 1..];
        labels.push((key, value));
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(format!(
                "expected `,` or `}}` after label, saw {:?}",
                rest.chars().take(20).collect::<String>()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEXT: &str = r#"# HELP vllm:kvcr_transfer_blocks_total blocks per scope
# TYPE vllm:kvcr_transfer_blocks_total counter
vllm:kvcr_transfer_blocks_total{scope="remote_deliver",engine="0"} 41
vllm:kvcr_transfer_blocks_total{scope="source_write"} 41.0 1700000000000
vllm:kvcr_duration_seconds_bucket{scope="x",result="success",le="+Inf"} 3
vllm:kvcr_duration_seconds_count{scope="remote_deliver",result="success",} 1
weird{path="a\"b\\c\nd"} NaN
inf_metric +Inf
neg -Inf # {trace_id="abc"} 1.0 123
   
this is not a sample
bad{scope="x} 1
nolabelvalue{scope=} 1
"#;

    #[test]
    fn parses_the_usual_and_records_problems() {
        let e = parse(TEXT);
        assert_eq!(e.samples.len(), 7, "{:#?}", e.samples);
        assert_eq!(e.problems.len(), 3, "{:#?}", e.problems);
        assert_eq!(e.types["vllm:kvcr_transfer_blocks_total"], "counter");
        assert_eq!(e.samples[0].label("engine"), Some("0"));
        assert_eq!(e.samples[1].timestamp_ms, Some(1_700_000_000_000));
        assert_eq!(e.samples[2].label("le"), Some("+Inf"));
        assert_eq!(e.samples[3].labels.len(), 2, "trailing comma accepted");
        assert_eq!(e.samples[4].label("path"), Some("a\"b\\c\nd"));
        assert!(e.samples[4].value.is_nan());
        assert_eq!(e.samples[5].value, f64::INFINITY);
        assert_eq!(e.samples[6].value, f64::NEG_INFINITY);
        assert_eq!(e.problems[0].at, "line 11");
        assert_eq!(e.samples[4].line, 7);
        assert_eq!(e.samples[4].text, r#"weird{path="a\"b\\c\nd"} NaN"#);
        insta::assert_snapshot!(e
            .problems
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n"));
    }

    /// Number of random inputs each property below runs on.
    const PROPTEST_CASES: u32 = 2048;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(PROPTEST_CASES))]

        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_sample_like_text(
            s in "[a-z_:]{0,8}(\\{([a-z]{0,3}=\"[^\"\\n]{0,5}\"?,?){0,3}\\}?)? ?[-+0-9.eEInfa]{0,6} ?[0-9]{0,4}( #.*)?"
        ) {
            let e = parse(&s);
            prop_assert!(e.samples.len() + e.problems.len() <= 1);
        }

        #[test]
        fn well_formed_samples_round_trip(
            name in "[a-z_][a-z0-9_:]{0,10}",
            k in "[a-z_][a-z0-9_]{0,5}",
            v in "[^\\n]{0,10}",
            value in -1.0e12f64..1.0e12,
        ) {
            let escaped = v.replace('\\', "\\\\").replace('"', "\\\"");
            let line = format!("{name}{{{k}=\"{escaped}\"}} {value}");
            let e = parse(&line);
            prop_assert_eq!(e.problems.len(), 0, "{}", line);
            prop_assert_eq!(&e.samples[0].labels[0].1, &v);
            prop_assert_eq!(e.samples[0].value, value);
        }
    }
}
