//! Stat-name patterns: `*` matches any run of characters (dots included), `?` one
//! character, everything else itself. The whole name must match.

/// Whether `name` matches the glob `pattern`.
///
/// ```
/// use perfbisect_report::glob::matches;
/// assert!(matches("fio.*_iops", "fio.write_iops"));
/// assert!(matches("fxmark.*.works/sec", "fxmark.ssd_ext4_dbench_client_32_directio.works/sec"));
/// assert!(matches("*time.elapsed_time", "time.elapsed_time"));
/// assert!(!matches("fio.*_iops", "fio.write_iops_min"));
/// ```
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative wildcard matching with one backtrack point (the last `*`).
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn literal_and_wildcards() {
        assert!(matches("aim7.jobs-per-min", "aim7.jobs-per-min"));
        assert!(!matches("aim7.jobs-per-min", "aim7.jobs-per-min-per-task"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "a.x.b.y.c"));
        assert!(!matches("a*b*c", "a.x.b.y.d"));
        assert!(matches(
            "will-it-scale.*_ops",
            "will-it-scale.per_thread_ops"
        ));
        assert!(matches("?io.*", "fio.x"));
        assert!(!matches("", "x"));
        assert!(matches("*_per_iteration", "kbuild.buildtime_per_iteration"));
    }
}
