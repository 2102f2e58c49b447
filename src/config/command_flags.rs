//! A command's own flags, as `kvcr-e2e compare`, `gate`, `mutants` and
//! `workload` read them: `--name value` or `--name=value`.

/// `arg` as a flag name and the value written inline (`--name=value`); an
/// argument that is not a `--` flag is its own name, with no value.
pub fn split(arg: &str) -> (&str, Option<String>) {
    match arg.split_once('=') {
        Some((name, value)) if arg.starts_with("--") => (name, Some(value.to_string())),
        _ => (arg, None),
    }
}

/// The value of flag `name`: the one written inline, else the next argument.
pub fn value<'a>(
    name: &str,
    inline: Option<String>,
    rest: &mut impl Iterator<Item = &'a String>,
) -> Result<String, String> {
    inline
        .or_else(|| rest.next().cloned())
        .ok_or_else(|| format!("{name} needs a value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_inline_or_next_and_a_missing_one_named() {
        assert_eq!(split("--rounds=4"), ("--rounds", Some("4".into())));
        assert_eq!(split("--rounds"), ("--rounds", None));
        assert_eq!(split("-x=1"), ("-x=1", None));
        let rest = ["8".to_string()];
        let mut it = rest.iter();
        assert_eq!(value("--rounds", None, &mut it).unwrap(), "8");
        assert_eq!(
            value("--rounds", None, &mut it).unwrap_err(),
            "--rounds needs a value"
        );
        assert_eq!(value("--rounds", Some("2".into()), &mut it).unwrap(), "2");
    }
}
