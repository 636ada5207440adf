//! Durations as people write them in flags, `DELAYQ_*` variables and the config file: always
//! with a unit (`500ms`, `30s`, `5m`, `1h30m`). A bare number is refused, naming where it
//! came from, because "30" could mean seconds as easily as milliseconds (the JSON API says
//! which with its `_ms` fields; a person typing a flag should not have to guess).

use std::ffi::OsStr;
use std::fmt;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;

/// Why a text is not a duration. The `Display` says what to write instead; the caller adds
/// where the text came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// A number without a unit, e.g. `30`.
    NoUnit(String),
    /// Anything else humantime does not read, with its reason.
    Invalid(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::NoUnit(n) => write!(f, "add a unit: {n}s or {n}ms"),
            DurationError::Invalid(why) => {
                write!(
                    f,
                    "not a duration ({why}); write e.g. 500ms, 2s, 30m or 1h30m"
                )
            }
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration with its unit: `500ms`, `2s`, `30m`, `1h30m`, `1day` (humantime's
/// syntax). A bare number such as `30` or `1.5` is [`DurationError::NoUnit`].
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let bare = !t.is_empty()
        && t.chars().any(|c| c.is_ascii_digit())
        && t.chars().all(|c| c.is_ascii_digit() || c == '.');
    if bare {
        return Err(DurationError::NoUnit(t.to_string()));
    }
    humantime::parse_duration(t).map_err(|e| DurationError::Invalid(e.to_string()))
}

/// The clap value parser of every duration argument: its errors name the flag
/// (`--max-wait 30: …`) or, when the value came from the environment, the variable
/// (`DELAYQ_MAX_WAIT=30: …`), which clap's own messages do not.
#[derive(Clone, Copy, Debug, Default)]
pub struct DurationParser;

impl TypedValueParser for DurationParser {
    type Value = Duration;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Duration, clap::Error> {
        self.parse_ref_(cmd, arg, value, ValueSource::CommandLine)
    }

    fn parse_ref_(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<Duration, clap::Error> {
        let text = value.to_string_lossy();
        parse(&text).map_err(|e| {
            let place = arg.map(|a| match (source, a.get_env(), a.get_long()) {
                (ValueSource::EnvVariable, Some(env), _) => {
                    format!("{}={text}", env.to_string_lossy())
                }
                (_, _, Some(long)) => format!("--{long} {text}"),
                _ => format!("<{}> {text}", a.get_id().as_str().to_uppercase()),
            });
            let place = place.unwrap_or_else(|| text.to_string());
            cmd.clone()
                .error(ErrorKind::ValueValidation, format!("{place}: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_required() {
        assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("30"), Err(DurationError::NoUnit("30".into())));
        assert_eq!(parse(" 1.5 "), Err(DurationError::NoUnit("1.5".into())));
        assert_eq!(
            parse("30").map_err(|e| e.to_string()),
            Err("add a unit: 30s or 30ms".to_string())
        );
        assert!(matches!(parse("soon"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse("-5s"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse(""), Err(DurationError::Invalid(_))));
    }

    #[test]
    fn errors_name_the_flag_or_the_variable() {
        let cmd = clap::Command::new("t").arg(
            clap::Arg::new("max_wait")
                .long("max-wait")
                .env("T_MAX_WAIT"),
        );
        let arg = cmd.get_arguments().next();
        let err = |source| {
            DurationParser
                .parse_ref_(&cmd, arg, OsStr::new("30"), source)
                .map_err(|e| e.to_string())
        };
        let flag = err(ValueSource::CommandLine).unwrap_err();
        assert!(
            flag.contains("--max-wait 30: add a unit: 30s or 30ms"),
            "{flag}"
        );
        let env = err(ValueSource::EnvVariable).unwrap_err();
        assert!(
            env.contains("T_MAX_WAIT=30: add a unit: 30s or 30ms"),
            "{env}"
        );
    }
}
