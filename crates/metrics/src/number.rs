//! Reading numbers out of text, with non-finite values told apart from non-numbers.

/// What a piece of text is, as a number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    /// A finite number.
    Finite(f64),
    /// `nan`, `inf`, `infinity` (any case, any sign) or a number too large for `f64`.
    NonFinite,
    /// Not a number at all.
    Not,
}

/// Reads a plain decimal number: optional sign, digits with an optional fraction, an
/// optional exponent. No thousands separators, no units, no surrounding text except
/// whitespace.
pub(crate) fn plain(s: &str) -> Number {
    let s = s.trim();
    if is_non_finite_word(s) {
        return Number::NonFinite;
    }
    if !is_decimal(s) {
        return Number::Not;
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Number::Finite(v),
        Ok(_) => Number::NonFinite,
        Err(_) => Number::Not,
    }
}

/// Like [`plain`], but also accepts `,` thousands separators in the integer part when every
/// group after the first has exactly three digits (`1,234,567.89`), as `perf stat` prints
/// counts. `0,46` (a decimal comma) is not a number here.
pub(crate) fn grouped(s: &str) -> Number {
    let s = s.trim();
    if !s.contains(',') {
        return plain(s);
    }
    let (int, rest) = match s.find(['.', 'e', 'E']) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let unsigned = int.strip_prefix(['-', '+']).unwrap_or(int);
    let mut groups = unsigned.split(',');
    let first = groups.next().unwrap_or("");
    let first_ok = (1..=3).contains(&first.len()) && first.bytes().all(|b| b.is_ascii_digit());
    if !first_ok || !groups.all(|g| g.len() == 3 && g.bytes().all(|b| b.is_ascii_digit())) {
        return Number::Not;
    }
    plain(&format!("{}{rest}", int.replace(',', "")))
}

fn is_non_finite_word(s: &str) -> bool {
    let word = s.strip_prefix(['-', '+']).unwrap_or(s).to_ascii_lowercase();
    matches!(word.as_str(), "nan" | "inf" | "infinity")
}

/// `[+-]digits[.digits][(e|E)[+-]digits]`, with digits on at least one side of the point.
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers() {
        assert_eq!(plain("12"), Number::Finite(12.0));
        assert_eq!(plain(" -0.5 "), Number::Finite(-0.5));
        assert_eq!(plain("+1.5e3"), Number::Finite(1500.0));
        assert_eq!(plain(".5"), Number::Finite(0.5));
        assert_eq!(plain("5."), Number::Finite(5.0));
        for not in [
            "", ".", "-", "1e", "1,234", "12 ms", "0x10", "1.2.3", "e5", "abc",
        ] {
            assert_eq!(plain(not), Number::Not, "{not:?}");
        }
    }

    #[test]
    fn non_finite_values_are_told_apart() {
        for nf in [
            "nan",
            "NaN",
            "-nan",
            "inf",
            "-Infinity",
            "+INF",
            "1e999",
            "-1e400",
        ] {
            assert_eq!(plain(nf), Number::NonFinite, "{nf:?}");
            assert_eq!(grouped(nf), Number::NonFinite, "{nf:?}");
        }
    }

    #[test]
    fn grouped_numbers() {
        assert_eq!(grouped("1,234,567"), Number::Finite(1_234_567.0));
        assert_eq!(grouped("12,345.67"), Number::Finite(12_345.67));
        assert_eq!(grouped("-1,000"), Number::Finite(-1000.0));
        assert_eq!(grouped("36.70"), Number::Finite(36.7));
        for not in [
            "0,46", "1,23", "1234,567", ",123", "1,,234", "1,234,", "1,2345",
        ] {
            assert_eq!(grouped(not), Number::Not, "{not:?}");
        }
    }
}
