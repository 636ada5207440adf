//! Tube names ([`Tube`]) as beanstalkd 1.12 accepts them, and their reversible mapping
//! onto delayq topic names.
//!
//! beanstalkd accepts 1 to 200 bytes of `[A-Za-z0-9-+/;.$_()]`, not starting with `-`
//! (probed: `use -foo` and a 201-byte name are `BAD_FORMAT`, `use foo-` is fine).
//! A topic allows `[A-Za-z0-9_.:-]`, so the six characters `+ / ; $ ( )` become `:`
//! and two upper-case hex digits of their byte (`a/b` is the topic `a:2Fb`). `:` is
//! never part of a tube name, so the mapping can be undone.

use std::fmt;

use delayq_core::{MAX_TOPIC_LEN, Topic};

/// Longest tube name beanstalkd accepts, in bytes.
pub const MAX_TUBE_LEN: usize = 200;

/// A valid beanstalkd tube name: 1 to 200 bytes of `[A-Za-z0-9-+/;.$_()]`, not starting
/// with `-`.
///
/// ```
/// use delayq_beanstalk::tube::Tube;
/// let tube = Tube::new("emails/high").unwrap();
/// assert_eq!(tube.topic().unwrap().as_str(), "emails:2Fhigh");
/// assert!(Tube::new("-x").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tube(String);

/// Why a name is not a tube, or a tube has no topic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TubeError {
    /// The name is empty.
    #[error(
        "a tube name cannot be empty; give 1 to 200 characters from A-Z a-z 0-9 - + / ; . $ _ ( )"
    )]
    Empty,
    /// The name is over 200 bytes.
    #[error("the tube name is {len} bytes long; shorten it to at most 200 bytes")]
    TooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// The name has a byte outside beanstalkd's alphabet.
    #[error("the tube name has {found:?} at byte {index}; use only A-Z a-z 0-9 - + / ; . $ _ ( )")]
    BadChar {
        /// The first offending character.
        found: char,
        /// Its byte offset in the name.
        index: usize,
    },
    /// The name starts with `-`, which beanstalkd forbids.
    #[error("a tube name cannot start with '-'; rename the tube {name:?}")]
    LeadingHyphen {
        /// The rejected name.
        name: String,
    },
    /// The tube's topic name (each of `+ / ; $ ( )` takes 3 characters) is over the topic limit.
    #[error(
        "tube {tube:?} maps to a topic name of {len} characters, over delayq's limit of {limit}; \
         use a shorter tube name or fewer of the characters + / ; $ ( ) (each takes 3 in the topic)"
    )]
    TooLongForTopic {
        /// The tube name.
        tube: String,
        /// The length of the topic name it maps to.
        len: usize,
        /// delayq's topic name limit.
        limit: usize,
    },
    /// delayq refused the mapped topic name for another reason (a bug in this mapping).
    #[error("tube {tube:?} maps to a topic delayq refuses ({source}); please report this as a bug")]
    Topic {
        /// The tube name.
        tube: String,
        /// What delayq said.
        source: delayq_core::Error,
    },
}

/// True for a byte of beanstalkd's `NAME_CHARS`.
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'+' | b'/' | b';' | b'.' | b'$' | b'_' | b'(' | b')'
        )
}

/// The two hex digits a tube character takes in a topic, or `None` when it stays as it is.
fn escape(b: u8) -> Option<&'static str> {
    Some(match b {
        b'+' => "2B",
        b'/' => "2F",
        b';' => "3B",
        b'$' => "24",
        b'(' => "28",
        b')' => "29",
        _ => return None,
    })
}

/// The tube character two hex digits of a topic stand for (the inverse of [`escape`]).
fn unescape(hex: &[u8]) -> Option<char> {
    Some(match hex {
        b"2B" => '+',
        b"2F" => '/',
        b"3B" => ';',
        b"24" => '$',
        b"28" => '(',
        b"29" => ')',
        _ => return None,
    })
}

impl Tube {
    /// Validates a tube name as beanstalkd does (`is_valid_tube` in its `prot.c`).
    pub fn new(name: &str) -> Result<Tube, TubeError> {
        if name.is_empty() {
            return Err(TubeError::Empty);
        }
        if name.len() > MAX_TUBE_LEN {
            return Err(TubeError::TooLong { len: name.len() });
        }
        if let Some((index, found)) = name
            .char_indices()
            .find(|&(_, c)| !c.is_ascii() || !is_name_byte(c as u8))
        {
            return Err(TubeError::BadChar { found, index });
        }
        if name.starts_with('-') {
            return Err(TubeError::LeadingHyphen {
                name: name.to_owned(),
            });
        }
        Ok(Tube(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The tube every connection starts out using and watching: `default`.
    pub fn default_tube() -> Tube {
        Tube("default".to_owned())
    }

    /// The delayq topic this tube maps to: `[A-Za-z0-9._-]` kept, each of `+ / ; $ ( )`
    /// written as `:` and two upper-case hex digits of its byte.
    pub fn topic(&self) -> Result<Topic, TubeError> {
        let mut mapped = String::with_capacity(self.0.len());
        for b in self.0.bytes() {
            match escape(b) {
                Some(hex) => {
                    mapped.push(':');
                    mapped.push_str(hex);
                }
                None => mapped.push(char::from(b)),
            }
        }
        if mapped.len() > MAX_TOPIC_LEN {
            return Err(TubeError::TooLongForTopic {
                tube: self.0.clone(),
                len: mapped.len(),
                limit: MAX_TOPIC_LEN,
            });
        }
        Topic::new(mapped).map_err(|source| TubeError::Topic {
            tube: self.0.clone(),
            source,
        })
    }

    /// The tube `topic` is the image of, or `None` when no tube maps to it (a `:` not
    /// followed by one of the six escapes, a leading `-`, a name over 200 bytes once
    /// unescaped).
    pub fn from_topic(topic: &Topic) -> Option<Tube> {
        let bytes = topic.as_str().as_bytes();
        let mut name = String::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b':' {
                name.push(unescape(bytes.get(i + 1..i + 3)?)?);
                i += 3;
            } else {
                name.push(char::from(bytes[i]));
                i += 1;
            }
        }
        Tube::new(&name).ok()
    }
}

impl fmt::Display for Tube {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Tube {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tube({:?})", self.0)
    }
}

impl AsRef<str> for Tube {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Tube {
    type Err = TubeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tube::new(s)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn names_beanstalkd_accepts() {
        for name in [
            "default",
            "a",
            "foo-",
            "+/;.$_()Az09",
            "x".repeat(200).as_str(),
            "(x)",
        ] {
            assert_eq!(Tube::new(name).unwrap().as_str(), name);
        }
        assert_eq!(Tube::default_tube().as_str(), "default");
    }

    #[test]
    fn names_beanstalkd_refuses() {
        assert!(matches!(Tube::new(""), Err(TubeError::Empty)));
        assert!(matches!(
            Tube::new(&"x".repeat(201)),
            Err(TubeError::TooLong { len: 201 })
        ));
        assert!(matches!(
            Tube::new("-foo"),
            Err(TubeError::LeadingHyphen { .. })
        ));
        for (name, index) in [("f:o", 1), ("f*o", 1), ("a b", 1), ("é", 0), ("ab\t", 2)] {
            match Tube::new(name) {
                Err(TubeError::BadChar { index: i, .. }) => assert_eq!(i, index, "{name:?}"),
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = Tube::new("a:b").unwrap_err().to_string();
        assert!(e.contains("use only A-Z a-z 0-9"), "{e}");
        let e = Tube::new("-a").unwrap_err().to_string();
        assert!(e.contains("cannot start with '-'"), "{e}");
        let long = Tube::new(&"/".repeat(67)).unwrap();
        let e = long.topic().unwrap_err();
        assert!(
            matches!(
                e,
                TubeError::TooLongForTopic {
                    len: 201,
                    limit: 200,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("use a shorter tube name"), "{e}");
    }

    #[test]
    fn topic_table() {
        for (tube, topic) in [
            ("default", "default"),
            ("a.b_c-d9", "a.b_c-d9"),
            ("a+b", "a:2Bb"),
            ("a/b", "a:2Fb"),
            ("a;b", "a:3Bb"),
            ("$x", ":24x"),
            ("(x)", ":28x:29"),
        ] {
            let mapped = Tube::new(tube).unwrap().topic().unwrap();
            assert_eq!(mapped.as_str(), topic);
            assert_eq!(Tube::from_topic(&mapped).unwrap().as_str(), tube);
        }
        // 66 escapes and 2 plain characters: 200 characters, the topic limit.
        let edge = format!("ab{}", "/".repeat(66));
        assert_eq!(
            Tube::new(&edge).unwrap().topic().unwrap().as_str().len(),
            200
        );
    }

    #[test]
    fn topics_that_are_no_tube() {
        for topic in [
            "a:b", "a:2b", "a:2", "a:", ":", "a:2A", "-a", "a:2Db", ":2Dx",
        ] {
            let topic = Topic::new(topic).unwrap();
            assert_eq!(Tube::from_topic(&topic), None, "{topic:?}");
        }
        // A leading escaped character that is fine in a tube.
        assert_eq!(
            Tube::from_topic(&Topic::new(":28a").unwrap())
                .unwrap()
                .as_str(),
            "(a"
        );
    }

    fn tube_name() -> impl Strategy<Value = String> {
        "[A-Za-z0-9+/;.$_()][A-Za-z0-9+/;.$_()-]{0,199}"
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn mapping_round_trips(name in tube_name()) {
            let tube = Tube::new(&name).unwrap();
            match tube.topic() {
                Ok(topic) => prop_assert_eq!(Tube::from_topic(&topic), Some(tube)),
                Err(TubeError::TooLongForTopic { len, .. }) => prop_assert!(len > MAX_TOPIC_LEN),
                Err(e) => prop_assert!(false, "{e}"),
            }
        }

        #[test]
        fn from_topic_inverts_topic(topic in "[A-Za-z0-9_.:-]{1,200}") {
            let topic = Topic::new(topic).unwrap();
            if let Some(tube) = Tube::from_topic(&topic) {
                prop_assert_eq!(tube.topic().unwrap(), topic);
            }
        }
    }
}
