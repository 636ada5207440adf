//! The YAML documents of `OK <bytes>` replies, written byte for byte as beanstalkd 1.12
//! writes them: `---\n`, then `key: value\n` lines (a dictionary) or `- name\n` lines
//! (a list); no quoting except where beanstalkd quotes (`version: "1.12"`).

use std::fmt::{self, Write as _};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

/// One value of a [`yaml_dict`], in beanstalkd's `printf` formats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum YamlValue {
    /// An unsigned count or id (`%u`, `%zu`, `%PRIu64`).
    Int(u64),
    /// A signed number (`%PRId64`: `age`, `time-left`, `pause-time-left`, ...).
    Signed(i64),
    /// Text written as it is (`tube: default`, `state: ready`, `hostname: vm`, `os: #1 SMP`).
    /// beanstalkd neither quotes nor escapes it; it should hold no newline.
    Str(String),
    /// Text in double quotes, as beanstalkd writes `version: "1.12"`.
    Quoted(String),
    /// `true` or `false` (`draining`).
    Bool(bool),
    /// Seconds and microseconds (`%d.%06d`: `rusage-utime: 0.025052`).
    Seconds(Duration),
}

impl fmt::Display for YamlValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            YamlValue::Int(n) => write!(f, "{n}"),
            YamlValue::Signed(n) => write!(f, "{n}"),
            YamlValue::Str(s) => f.write_str(s),
            YamlValue::Quoted(s) => write!(f, "\"{s}\""),
            YamlValue::Bool(b) => write!(f, "{b}"),
            YamlValue::Seconds(d) => write!(f, "{}.{:06}", d.as_secs(), d.subsec_micros()),
        }
    }
}

/// A dictionary document: `---\n` and one `key: value\n` per field, in order (the data of
/// `stats`, `stats-job` and `stats-tube`).
pub fn yaml_dict(fields: &[(&str, YamlValue)]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + fields.len() * 24);
    out.put_slice(b"---\n");
    for (key, value) in fields {
        // Writing to a `BytesMut` cannot fail.
        let _ = writeln!(out, "{key}: {value}");
    }
    out.freeze()
}

/// A list document: `---\n` and one `- name\n` per name (the data of `list-tubes` and
/// `list-tubes-watched`).
pub fn yaml_list<'a>(names: impl IntoIterator<Item = &'a str>) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_slice(b"---\n");
    for name in names {
        out.put_slice(b"- ");
        out.put_slice(name.as_bytes());
        out.put_slice(b"\n");
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Reply;

    /// The start of a `stats-job` answer and bits of a `stats` answer of beanstalkd 1.12.
    #[test]
    fn dict_as_beanstalkd_writes_it() {
        let doc = yaml_dict(&[
            ("id", YamlValue::Int(6)),
            ("tube", YamlValue::Str("default".into())),
            ("state", YamlValue::Str("ready".into())),
            ("time-left", YamlValue::Signed(-1)),
            ("version", YamlValue::Quoted("1.12".into())),
            (
                "rusage-stime",
                YamlValue::Seconds(Duration::from_micros(25_052)),
            ),
            (
                "rusage-utime",
                YamlValue::Seconds(Duration::new(3, 999_999_999)),
            ),
            ("draining", YamlValue::Bool(false)),
        ]);
        assert_eq!(
            &doc[..],
            b"---\nid: 6\ntube: default\nstate: ready\ntime-left: -1\nversion: \"1.12\"\n\
              rusage-stime: 0.025052\nrusage-utime: 3.999999\ndraining: false\n"
        );
        assert_eq!(&yaml_dict(&[])[..], b"---\n");
    }

    #[test]
    fn list_as_beanstalkd_writes_it() {
        let mut out = BytesMut::new();
        Reply::Ok(yaml_list(["default"])).encode(&mut out);
        assert_eq!(&out[..], b"OK 14\r\n---\n- default\n\r\n");
        assert_eq!(&yaml_list(["a", "b(c)"])[..], b"---\n- a\n- b(c)\n");
        assert_eq!(&yaml_list([])[..], b"---\n");
    }
}
