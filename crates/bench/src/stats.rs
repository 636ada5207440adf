//! Medians with min–max over repetitions.

/// The median, minimum and maximum of some repetitions of one figure.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many repetitions.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; all zero when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
                n: 0,
            };
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        }
    }

    /// `median (min–max)` with `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        if self.n == 0 {
            return "—".into();
        }
        format!(
            "{} ({}–{})",
            fmt_num(self.median, digits),
            fmt_num(self.min, digits),
            fmt_num(self.max, digits)
        )
    }
}

/// A number with thousands separators and `digits` decimals.
pub fn fmt_num(x: f64, digits: usize) -> String {
    let s = format!("{:.*}", digits, x.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if x < 0.0 && x.abs() >= 0.5 * 10f64.powi(-(digits as i32)) {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_formatting() {
        let s = Spread::of([3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of([1.0, 2.0, 4.0, 8.0]).median, 3.0);
        assert_eq!(Spread::of([]).show(1), "—");
        assert_eq!(fmt_num(1234567.891, 1), "1,234,567.9");
        assert_eq!(fmt_num(999.0, 0), "999");
        assert_eq!(fmt_num(-1500.0, 0), "-1,500");
        assert_eq!(s.show(0), "2 (1–3)");
    }
}
