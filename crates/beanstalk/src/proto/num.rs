//! The three ways beanstalkd 1.12 reads a number from a command line, reproduced exactly.
//!
//! - [`strict`] is its `read_u32`/`read_u64`: skip spaces (only `' '`), then a digit must
//!   follow (so no sign, no tab), then digits; overflow of the type is an error. Most
//!   commands also require the end of the line after the last number.
//! - [`c_strtoul`] is C's `strtoul` (`kick`): any C white space, an optional sign (`-1`
//!   wraps to 2^64-1), trailing garbage ignored.
//! - [`c_strtol`] is C's `strtol` (`reserve-with-timeout`): the same, signed; no digits at
//!   all is 0, not an error.

/// Reads `' '* digit+` as a number of at most `max`; returns it and the rest of the line.
pub(crate) fn strict(s: &[u8], max: u64) -> Option<(u64, &[u8])> {
    let s = trim_spaces(s);
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let n = decimal(&s[..digits])?;
    (n <= max).then_some((n, &s[digits..]))
}

/// [`strict`], then the end of the line.
pub(crate) fn strict_last(s: &[u8], max: u64) -> Option<u64> {
    match strict(s, max)? {
        (n, []) => Some(n),
        _ => None,
    }
}

/// Parses `strtoul(s, &end, 10)`: `None` when it sets `errno` (overflow) or consumes nothing.
pub(crate) fn c_strtoul(s: &[u8]) -> Option<u64> {
    let (negative, magnitude) = c_signed_digits(s)?;
    let n = magnitude?;
    Some(if negative { n.wrapping_neg() } else { n })
}

/// Parses `strtol(s, &end, 10)`: `Err(())` when it sets `errno` (out of the `long` range);
/// no digits is 0, as glibc leaves `errno` alone then.
pub(crate) fn c_strtol(s: &[u8]) -> Result<i64, ()> {
    let Some((negative, magnitude)) = c_signed_digits(s) else {
        return Ok(0);
    };
    let n = magnitude.ok_or(())?;
    if negative {
        // `-9223372036854775808` is in range; one more is not.
        0i64.checked_sub_unsigned(n).ok_or(())
    } else {
        i64::try_from(n).map_err(|_| ())
    }
}

/// C white space, a sign, digits: `None` without digits, else the sign and the magnitude
/// (`None` inside when it overflows 64 bits).
fn c_signed_digits(s: &[u8]) -> Option<(bool, Option<u64>)> {
    let start = s
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count();
    let s = &s[start..];
    let (negative, s) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    (digits > 0).then(|| (negative, decimal(&s[..digits])))
}

fn trim_spaces(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ').count();
    &s[n..]
}

/// The value of ASCII digits, `None` on 64-bit overflow.
fn decimal(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const U32: u64 = u32::MAX as u64;

    #[test]
    fn strict_table() {
        assert_eq!(strict(b"12 x", U32), Some((12, &b" x"[..])));
        assert_eq!(strict(b"   007", U32), Some((7, &b""[..])));
        assert_eq!(strict(b"4294967295", U32), Some((U32, &b""[..])));
        assert_eq!(strict(b"4294967296", U32), None);
        assert_eq!(
            strict(b"18446744073709551615", u64::MAX),
            Some((u64::MAX, &b""[..]))
        );
        assert_eq!(strict(b"18446744073709551616", u64::MAX), None);
        for bad in [&b""[..], b" ", b"+1", b"-1", b"\t1", b"x1"] {
            assert_eq!(strict(bad, U32), None, "{bad:?}");
        }
        assert_eq!(strict_last(b" 5", U32), Some(5));
        assert_eq!(strict_last(b"5 ", U32), None);
        assert_eq!(strict_last(b"5x", U32), None);
    }

    #[test]
    fn strtoul_table() {
        assert_eq!(c_strtoul(b"5"), Some(5));
        assert_eq!(c_strtoul(b" \t+2 junk"), Some(2));
        assert_eq!(c_strtoul(b"-1"), Some(u64::MAX));
        assert_eq!(c_strtoul(b"-0"), Some(0));
        assert_eq!(c_strtoul(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(c_strtoul(b"18446744073709551616"), None);
        assert_eq!(c_strtoul(b"-18446744073709551616"), None);
        for bad in [&b""[..], b" ", b"+", b"-", b"x1", b"+ 1"] {
            assert_eq!(c_strtoul(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn strtol_table() {
        assert_eq!(c_strtol(b"5"), Ok(5));
        assert_eq!(c_strtol(b"x"), Ok(0));
        assert_eq!(c_strtol(b""), Ok(0));
        assert_eq!(c_strtol(b"  +1x"), Ok(1));
        assert_eq!(c_strtol(b"-1"), Ok(-1));
        assert_eq!(c_strtol(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(c_strtol(b"9223372036854775808"), Err(()));
        assert_eq!(c_strtol(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(c_strtol(b"-9223372036854775809"), Err(()));
        assert_eq!(c_strtol(b"99999999999999999999"), Err(()));
    }
}
