//! Values that are one of a few words (`--engine cpu`, `--topology 2p1d`,
//! `--log-level debug`): one enum each, its words written once, and every
//! spelling of it (help, errors, flags, profiles, JSON) taken from there.

/// An enum whose values are written as words: `ALL`, `WORDS`, `as_str`,
/// `from_word` (case-insensitive), `Display`, `FromStr` (the error lists
/// the accepted words), and serde as the word.
macro_rules! word_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in the order of the accepted words.
            pub const ALL: [$name; [$($word),+].len()] = [$($name::$variant),+];

            /// The accepted words, in order.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The word used in flags, environment, profiles and evidence.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }

            /// Parses the word (case-insensitive, spaces around it
            /// ignored); `None` if it is not one of [`Self::WORDS`].
            pub fn from_word(word: &str) -> Option<Self> {
                let w = word.trim().to_ascii_lowercase();
                match w.as_str() { $($word => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                Self::from_word(text).ok_or_else(|| {
                    format!(
                        concat!("unknown ", $what, " `{}`: expected one of {}"),
                        text,
                        Self::WORDS.join(", ")
                    )
                })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = <String as serde::Deserialize>::deserialize(d)?;
                word.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use word_enum;

#[cfg(test)]
mod tests {
    word_enum!(
        /// A test enum.
        Shape, "shape" {
            /// Round.
            Round = "round",
            /// Two words.
            TwoSided = "two-sided",
        }
    );

    #[test]
    fn words_round_trip_and_errors_list_them() {
        for shape in Shape::ALL {
            assert_eq!(shape.as_str().parse::<Shape>(), Ok(shape));
            assert_eq!(shape.to_string(), shape.as_str());
        }
        assert_eq!(Shape::from_word(" Two-Sided "), Some(Shape::TwoSided));
        assert_eq!(
            "square".parse::<Shape>(),
            Err("unknown shape `square`: expected one of round, two-sided".to_string())
        );
        assert_eq!(Shape::WORDS, ["round", "two-sided"]);
        let json = serde_json::to_string(&Shape::TwoSided).unwrap_or_default();
        assert_eq!(json, "\"two-sided\"");
        assert_eq!(
            serde_json::from_str::<Shape>(&json).ok(),
            Some(Shape::TwoSided)
        );
    }
}
