//! The fixed-width cells of an LKP comparison row, as lkp-tests' `compare.rb` prints them.
//!
//! Each function returns one cell, padded to its column width; a row is the
//! concatenation of the cells, two spaces and the stat name. The formats are
//! C/Ruby `printf` ones, reproduced here because Rust's formatter has no `%g`:
//!
//! ```text
//! AVG(x) = "%10.2f" if |x| < 1000;  "%10.4g" if |x| > 1e8;  else "%10d" (truncated)
//! STD(s) = " ±%3d%%" (integer part) if s > 2, else six spaces
//! CHG(p) = "%+10.1f%% "  ("%+10.2g%% " if |p| ≥ 100000); absolute stats "%+10.1f  "
//! ```

/// Width of a number column (`ABS_WIDTH` in compare.rb).
pub const ABS_WIDTH: usize = 10;
/// Width of a change column, without its trailing `% ` (`REL_WIDTH`).
pub const REL_WIDTH: usize = 10;
/// Width of a `± NN%` cell (`ERR_WIDTH`).
pub const ERR_WIDTH: usize = 6;

/// C's `%.<prec>g`: `prec` significant digits, exponent form when the exponent is
/// below -4 or at least `prec`, trailing zeros removed.
///
/// ```
/// use perfbisect_report::format::format_g;
/// assert_eq!(format_g(2.98e8, 4), "2.98e+08");
/// assert_eq!(format_g(3.153e8, 4), "3.153e+08");
/// assert_eq!(format_g(123456.0, 2), "1.2e+05");
/// assert_eq!(format_g(0.0001234, 3), "0.000123");
/// assert_eq!(format_g(42.0, 4), "42");
/// ```
pub fn format_g(v: f64, prec: usize) -> String {
    let p = prec.max(1);
    if v.is_nan() {
        return "nan".to_owned();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rounding to `p` significant digits decides the exponent (9.9995 → 1.000e1).
    let e_form = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = e_form
        .split_once('e')
        .expect("Rust's {:e} always has an exponent");
    let x: i32 = exp.parse().expect("Rust's exponent is an integer");
    if x < -4 || x >= p as i32 {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip_fraction_zeros(mantissa), sign, x.abs())
    } else {
        let decimals = (p as i32 - 1 - x) as usize;
        strip_fraction_zeros(&format!("{v:.decimals$}")).to_owned()
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `%+<width>.<prec>g`.
fn format_g_signed(v: f64, prec: usize, width: usize) -> String {
    let body = format_g(v, prec);
    let signed = if body.starts_with('-') {
        body
    } else {
        format!("+{body}")
    };
    format!("{signed:>width$}")
}

/// The AVG cell: `%10.2f` below 1000, `%10.4g` above 1e8, else the integer part in `%10d`.
///
/// ```
/// use perfbisect_report::format::format_avg;
/// assert_eq!(format_avg(1218093.9), "   1218093");
/// assert_eq!(format_avg(176.5), "    176.50");
/// assert_eq!(format_avg(2.98e8), "  2.98e+08");
/// ```
pub fn format_avg(x: f64) -> String {
    if x.abs() < 1000.0 {
        format!("{x:ABS_WIDTH$.2}")
    } else if x.abs() > 100_000_000.0 {
        format!("{:>ABS_WIDTH$}", format_g(x, 4))
    } else {
        // Ruby's `%d` of a Float truncates towards zero.
        format!("{:ABS_WIDTH$}", x.trunc() as i64)
    }
}

/// The STD cell from a relative standard deviation in percent: ` ±NN%` when above 2,
/// else blank. `None` (one sample or none: no deviation) is blank too.
///
/// ```
/// use perfbisect_report::format::format_std;
/// assert_eq!(format_std(Some(18.7)), " ± 18%");
/// assert_eq!(format_std(Some(134.2)), " ±134%");
/// assert_eq!(format_std(Some(2.0)), "      ");
/// assert_eq!(format_std(None), "      ");
/// ```
pub fn format_std(pct_stddev: Option<f64>) -> String {
    match pct_stddev {
        Some(s) if s > 2.0 => format!(" ±{:3}%", s.trunc() as i64),
        _ => " ".repeat(ERR_WIDTH),
    }
}

/// The CHG cell: `%+10.1f% ` (relative change in percent) or `%+10.1f  ` for stats whose
/// change is absolute; `%.2g` instead of `%.1f` from 100000 up.
///
/// ```
/// use perfbisect_report::format::format_change;
/// assert_eq!(format_change(54.8153, false), "     +54.8% ");
/// assert_eq!(format_change(-0.06, true), "      -0.1  ");
/// assert_eq!(format_change(123456.0, false), "  +1.2e+05% ");
/// ```
pub fn format_change(p: f64, absolute: bool) -> String {
    let number = if p.abs() < 100_000.0 {
        format!("{p:+REL_WIDTH$.1}")
    } else {
        format_g_signed(p, 2, REL_WIDTH)
    };
    if absolute {
        format!("{number}  ")
    } else {
        format!("{number}% ")
    }
}

/// A failure column: `%11d` fails (blank when zero) then `:%-4d` runs.
///
/// ```
/// use perfbisect_report::format::format_fails;
/// assert_eq!(format_fails(6, 6), "          6:6   ");
/// assert_eq!(format_fails(0, 6), "           :6   ");
/// ```
pub fn format_fails(fails: u32, runs: u32) -> String {
    let count = if fails == 0 {
        " ".repeat(ABS_WIDTH + 1)
    } else {
        format!("{fails:w$}", w = ABS_WIDTH + 1)
    };
    format!("{count}:{runs:<w$}", w = ERR_WIDTH - 2)
}

/// The `%reproduction` cell: `%10.0f% `.
///
/// ```
/// use perfbisect_report::format::format_reproduction;
/// assert_eq!(format_reproduction(-50.0), "       -50% ");
/// ```
pub fn format_reproduction(pct: f64) -> String {
    format!("{pct:REL_WIDTH$.0}% ")
}

/// Prose wrapped at `width` columns on spaces (each input line a paragraph); a word longer
/// than the width stays whole on its own line.
///
/// ```
/// use perfbisect_report::format::wrap;
/// assert_eq!(wrap("aa bb cc", 5), "aa bb\ncc");
/// assert_eq!(wrap("a\nbbbbbbb c", 4), "a\nbbbbbbb\nc");
/// ```
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        for word in para.split(' ').filter(|w| !w.is_empty()) {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                out.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        out.push(line);
    }
    out.join("\n")
}

/// A probability in percent that never rounds a chance short of certainty up to 100%:
///
/// ```
/// use perfbisect_report::format::probability;
/// assert_eq!(probability(0.9998), "99.98%");
/// assert_eq!(probability(0.99999), ">99.99%");
/// assert_eq!(probability(0.993), "99.3%");
/// assert_eq!(probability(1.0), "100.0%");
/// ```
pub fn probability(p: f64) -> String {
    let pct = 100.0 * p;
    if (99.9..100.0).contains(&pct) {
        let s = format!("{pct:.2}%");
        if s == "100.00%" { ">99.99%".into() } else { s }
    } else {
        format!("{pct:.1}%")
    }
}

/// A test's p-value: four decimals, or the exponent form below 0.0001 (`3.1e-6`).
///
/// ```
/// use perfbisect_report::format::p_value;
/// assert_eq!(p_value(0.0123), "0.0123");
/// assert_eq!(p_value(3.14e-6), "3.1e-6");
/// assert_eq!(p_value(0.0), "0");
/// ```
pub fn p_value(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p < 1e-4 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_switches_to_exponent_at_precision() {
        assert_eq!(format_g(9999.0, 4), "9999");
        assert_eq!(format_g(99995.0, 4), "1e+05");
        assert_eq!(format_g(12345.0, 4), "1.234e+04");
        assert_eq!(format_g(-2.5e-5, 2), "-2.5e-05");
        assert_eq!(format_g(0.5, 4), "0.5");
        assert_eq!(format_g(1e102, 2), "1e+102");
    }

    #[test]
    fn avg_boundaries() {
        assert_eq!(format_avg(999.994), "    999.99");
        assert_eq!(format_avg(1000.0), "      1000");
        assert_eq!(format_avg(100_000_000.0), " 100000000");
        assert_eq!(format_avg(100_000_001.0), "     1e+08");
        assert_eq!(format_avg(-3013.7), "     -3013");
        assert_eq!(format_avg(0.0), "      0.00");
    }

    #[test]
    fn change_keeps_the_sign_of_small_negative_changes() {
        assert_eq!(format_change(-0.03, true), "      -0.0  ");
        assert_eq!(format_change(0.0, false), "      +0.0% ");
        assert_eq!(format_change(-99.99, false), "    -100.0% ");
    }

    #[test]
    fn cell_widths_are_fixed() {
        for x in [0.0, 0.08, 999.0, 1234.0, 6_468_008.0, 2.98e8, -42.0] {
            assert_eq!(format_avg(x).chars().count(), ABS_WIDTH, "{x}");
        }
        for p in [-99.0, 0.0, 54.8, 1e5, -1e7] {
            assert_eq!(
                format_change(p, false).chars().count(),
                REL_WIDTH + 2,
                "{p}"
            );
        }
        for s in [None, Some(0.0), Some(5.0), Some(999.0)] {
            assert_eq!(format_std(s).chars().count(), ERR_WIDTH);
        }
    }
}
