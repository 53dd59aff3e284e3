//! The text and SVG plots.

use perfbisect_report::plot::{BAD_MARK, BOTH_MARK, GOOD_MARK, TEXT_HEIGHT, TEXT_WIDTH};
use perfbisect_report::{CommitSamples, Judgement, svg_plot, text_plot};

fn commit(i: usize, judged: Judgement, values: &[f64]) -> CommitSamples {
    CommitSamples {
        sha: format!("{i:02x}{}", "ab".repeat(19)),
        judged,
        values: values.to_vec(),
    }
}

/// A bisect of a rising metric: good commits near 100, bad ones near 120, interleaved as
/// a bisect measures them.
fn rising() -> Vec<CommitSamples> {
    vec![
        commit(0, Judgement::Good, &[99.0, 100.0, 101.0]),
        commit(1, Judgement::Bad, &[119.0, 120.0, 121.5]),
        commit(2, Judgement::Good, &[100.5, 99.5, 100.2]),
        commit(3, Judgement::Bad, &[120.3, 118.9, 120.0]),
        commit(4, Judgement::Good, &[98.9, 100.9, 101.2]),
    ]
}

fn marks(lines: &[String], mark: char) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    // Only the canvas rows: between the two frame lines, inside the edges.
    for (r, line) in lines.iter().enumerate().take(TEXT_HEIGHT - 1).skip(2) {
        let inner: Vec<char> = line.chars().collect();
        let start = inner.iter().position(|c| *c == '|' || *c == '+').unwrap() + 1;
        for (c, ch) in inner[start..inner.len() - 1].iter().enumerate() {
            if *ch == mark {
                v.push((r, c));
            }
        }
    }
    v
}

#[test]
fn text_plot_is_80_by_20_with_a_full_width_frame() {
    let p = text_plot("fio.write_iops", &rising()).unwrap();
    assert_eq!(p.lines.len(), TEXT_HEIGHT);
    for l in &p.lines {
        assert!(l.chars().count() <= TEXT_WIDTH, "{l:?}");
        assert_eq!(l.trim_end(), l, "trailing space in {l:?}");
    }
    // Top and bottom frame, and every canvas row, span the full width.
    for l in &p.lines[1..] {
        assert_eq!(l.chars().count(), TEXT_WIDTH, "{l:?}");
    }
    assert!(p.lines[0].trim() == "fio.write_iops");
}

#[test]
fn every_sample_is_drawn_and_good_lies_below_bad_when_the_metric_rose() {
    let p = text_plot("m", &rising()).unwrap();
    let good = marks(&p.lines, GOOD_MARK);
    let bad = marks(&p.lines, BAD_MARK);
    assert!(marks(&p.lines, BOTH_MARK).is_empty());
    // 9 good and 6 bad samples over 15 distinct columns.
    assert_eq!(good.len(), 9);
    assert_eq!(bad.len(), 6);
    let lowest_bad = bad.iter().map(|(r, _)| *r).max().unwrap();
    let highest_good = good.iter().map(|(r, _)| *r).min().unwrap();
    // Rows count downwards: every good row is below every bad row.
    assert!(highest_good > lowest_bad, "good {good:?} bad {bad:?}");
    // x is the sample index: the first sample is in the first column, the last in the last.
    assert_eq!(good.iter().map(|(_, c)| *c).min(), Some(0));
    let cols = p.lines[1].chars().count() - p.lines[1].find('+').unwrap() - 2;
    assert_eq!(good.iter().map(|(_, c)| *c).max(), Some(cols - 1));
}

#[test]
fn legend_lists_exactly_the_marks_drawn() {
    let p = text_plot("m", &rising()).unwrap();
    assert_eq!(p.legend.len(), 2);
    assert!(p.legend[0].ends_with("[*] bisect-good sample"));
    assert!(p.legend[1].ends_with("[O] bisect-bad  sample"));

    let only_good = vec![commit(0, Judgement::Good, &[1.0, 2.0, 3.0])];
    let p = text_plot("m", &only_good).unwrap();
    assert_eq!(p.legend.len(), 1);
    assert!(p.legend[0].ends_with("[*] bisect-good sample"));
    assert!(marks(&p.lines, BAD_MARK).is_empty());

    // More samples than columns, alternating good and bad at one value: cells hold
    // both, drawn and listed as '#'.
    let crowded: Vec<CommitSamples> = (0..200)
        .map(|i| {
            commit(
                i,
                if i % 2 == 0 {
                    Judgement::Good
                } else {
                    Judgement::Bad
                },
                &[5.0],
            )
        })
        .collect();
    let p = text_plot("m", &crowded).unwrap();
    assert!(!marks(&p.lines, BOTH_MARK).is_empty());
    assert!(p.legend.iter().any(|l| l.contains("[#]")));
    for (mark, word) in [(GOOD_MARK, "[*]"), (BAD_MARK, "[O]"), (BOTH_MARK, "[#]")] {
        assert_eq!(
            !marks(&p.lines, mark).is_empty(),
            p.legend.iter().any(|l| l.contains(word)),
            "{mark}"
        );
    }
}

#[test]
fn text_plot_of_nothing_is_none() {
    assert!(text_plot("m", &[]).is_none());
    assert!(text_plot("m", &[commit(0, Judgement::Good, &[f64::NAN])]).is_none());
}

#[test]
fn text_plot_of_one_value_has_a_range() {
    let p = text_plot("m", &[commit(0, Judgement::Bad, &[7.0, 7.0])]).unwrap();
    assert_eq!(p.lines.len(), TEXT_HEIGHT);
    assert_eq!(marks(&p.lines, BAD_MARK).len(), 2);
}

#[test]
fn svg_has_every_sample_coloured_axes_and_the_culprit() {
    let samples = rising();
    let culprit = samples[1].sha.clone();
    let svg = svg_plot("fio.write_iops <&>", &samples, Some(&culprit[..12])).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<circle class=\"good\"").count(), 9);
    assert_eq!(svg.matches("<circle class=\"bad\"").count(), 6);
    assert_eq!(svg.matches("class=\"culprit\"").count(), 1);
    assert!(svg.contains(">culprit</text>"));
    // Y ticks with labels, x labels with short ids.
    assert!(svg.matches("class=\"ytick\"").count() >= 3);
    assert!(svg.contains(">100</text>") || svg.contains(">105</text>"));
    assert_eq!(svg.matches("class=\"xtick\"").count(), 5);
    assert!(svg.contains(&format!(">{}</text>", &culprit[..7])));
    // Legend for both kinds; text escaped.
    assert!(svg.contains("bisect-good sample") && svg.contains("bisect-bad sample"));
    assert!(svg.contains("fio.write_iops &lt;&amp;&gt;"));
    assert!(!svg.contains("<&>"));
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
}

#[test]
fn svg_without_culprit_or_samples() {
    let svg = svg_plot("m", &rising(), None).unwrap();
    assert!(!svg.contains("class=\"culprit\""));
    let svg = svg_plot("m", &rising(), Some("ffff")).unwrap();
    assert!(!svg.contains("class=\"culprit\""));
    assert!(svg_plot("m", &[], None).is_none());
}

#[test]
#[ignore = "writes an SVG for a human to look at: PERFBISECT_SVG=path"]
fn write_svg() {
    let mut samples = Vec::new();
    for i in 0..12 {
        let bad = i >= 7;
        let base = if bad { 1_885_792.0 } else { 1_218_093.0 };
        let values: Vec<f64> = (0..3)
            .map(|j| base * (1.0 + 0.01 * (j as f64 - 1.0)))
            .collect();
        samples.push(commit(
            i,
            if bad { Judgement::Bad } else { Judgement::Good },
            &values,
        ));
    }
    let culprit = samples[7].sha.clone();
    let svg = svg_plot("fio.write_iops", &samples, Some(&culprit)).unwrap();
    std::fs::write(std::env::var("PERFBISECT_SVG").unwrap(), svg).unwrap();
}
