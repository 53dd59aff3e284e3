//! Subjects, headlines, tags, HTML, the other outcomes and JSON.

mod common;

use std::collections::BTreeMap;

use common::{commit, fio_job, sha40};
use perfbisect_report::mail::{OutcomeKind, ReportError};
use perfbisect_report::{
    Addition, Candidate, CommitSamples, Direction, FailureCount, Judgement, KpiTable, Machine,
    Outcome, Report, ReportConfig, ReportInput, Repository, Robot, Run, Runs, Verdict, render,
    subject,
};

const CULPRIT: &str = "b5501f970dbc039df1f7c720b7a481b62de125cd";

fn runs_of(metric: &str, values: &[f64]) -> Vec<Run> {
    values
        .iter()
        .map(|v| Run {
            completed: true,
            metrics: BTreeMap::from([(metric.to_owned(), *v)]),
        })
        .collect()
}

fn input(metric: &str, base: &[f64], new: &[f64]) -> ReportInput {
    ReportInput {
        repository: Repository {
            url: "https://git.example.org/linux.git".into(),
            name: None,
            branch: Some("master".into()),
        },
        good: commit(&sha40("aaaa"), "mm: old"),
        bad: commit(&sha40("cccc"), "mm: new"),
        job: fio_job(),
        machine: Machine {
            nr_threads: Some(8),
            ..Machine::default()
        },
        metric: metric.into(),
        direction: None,
        outcome: Outcome::Found {
            culprit: commit(CULPRIT, "mm/vmscan: batch the LRU"),
            parent: commit(&sha40("bbbb"), "mm: parent"),
            runs: Runs {
                parent: runs_of(metric, base),
                culprit: runs_of(metric, new),
                failures: Vec::new(),
            },
            confidence: None,
            also: Vec::new(),
        },
        samples: Vec::new(),
        subject_prefix: None,
        robot: Robot::default(),
        dashboard_url: Some("https://perfbisect.example/bisects/7".into()),
        found_by: None,
        findings: None,
    }
}

const LOW: [f64; 4] = [100.0, 101.0, 99.0, 100.0];
const HIGH: [f64; 4] = [110.0, 111.0, 109.0, 110.0];

fn report(i: &ReportInput) -> Report {
    render(i, &ReportConfig::default()).unwrap()
}

#[test]
fn higher_is_better_rising_is_an_improvement_without_tags() {
    let r = report(&input("will-it-scale.per_process_ops", &LOW, &HIGH));
    assert_eq!(
        r.subject,
        "[linux:master] [mm/vmscan]  b5501f970d:  will-it-scale.per_process_ops 10.0% improvement"
    );
    assert!(
        r.text.contains(
            "perfbisect noticed a 10.0% improvement of will-it-scale.per_process_ops on:\n"
        )
    );
    assert_eq!(r.headline.as_ref().unwrap().verdict, Verdict::Improvement);
    assert!(!r.text.contains("Reported-by"));
    assert!(!r.text.contains("kindly add following tags"));
    assert!(!r.html.contains("Reported-by"));
}

#[test]
fn higher_is_better_falling_is_a_regression_with_tags() {
    let r = report(&input("will-it-scale.per_process_ops", &HIGH, &LOW));
    assert!(
        r.subject
            .ends_with(":  will-it-scale.per_process_ops 9.1% regression")
    );
    assert!(
        r.text
            .contains("perfbisect noticed a 9.1% regression of will-it-scale.per_process_ops on:")
    );
    assert!(r.text.contains(
        "kindly add following tags\n| Reported-by: perfbisect\n| Closes: https://perfbisect.example/bisects/7\n"
    ));
    // The tags come before the details, as in LKP's mails.
    assert!(r.text.find("Reported-by").unwrap() < r.text.find("Details are as below").unwrap());
    assert!(r.html.contains("| Reported-by: perfbisect"));
}

#[test]
fn lower_is_better_metrics_invert_the_verdict() {
    let down = report(&input("kbuild.buildtime_per_iteration", &HIGH, &LOW));
    assert!(down.subject.ends_with("9.1% improvement"));
    let up = report(&input("kbuild.buildtime_per_iteration", &LOW, &HIGH));
    assert!(up.subject.ends_with("10.0% regression"));
    assert!(up.text.contains("| Reported-by: "));
}

#[test]
fn unknown_direction_says_change_with_a_sign_and_the_input_can_state_it() {
    let mut i = input("myapp.frobs", &HIGH, &LOW);
    let r = report(&i);
    assert!(r.subject.ends_with(":  myapp.frobs -9.1% change"));
    assert!(r.text.contains("noticed a -9.1% change of myapp.frobs on:"));
    assert!(!r.text.contains("Reported-by"));

    i.direction = Some(Direction::HigherIsBetter);
    assert!(
        subject(&i, &ReportConfig::default())
            .unwrap()
            .ends_with("9.1% regression")
    );

    // Or the configuration's KPI table.
    let config: ReportConfig = serde_json::from_str(r#"{"kpi": {"myapp.*": "lower"}}"#).unwrap();
    i.direction = None;
    assert!(subject(&i, &config).unwrap().ends_with("9.1% improvement"));
}

#[test]
fn robot_name_email_and_subject_prefix_are_configurable() {
    let mut i = input("will-it-scale.per_process_ops", &HIGH, &LOW);
    i.robot = Robot {
        name: "lab robot".into(),
        email: Some("robot@example.org".into()),
    };
    i.subject_prefix = Some("perf".into());
    i.repository.name = Some("linus".into());
    let r = report(&i);
    assert!(
        r.subject
            .starts_with("[linus:master] [perf]  b5501f970d:  ")
    );
    assert!(r.text.contains("lab robot noticed a 9.1% regression"));
    assert!(
        r.text
            .contains("| Reported-by: lab robot <robot@example.org>\n")
    );
    assert!(
        r.text
            .ends_with("-- \nlab robot\nhttps://perfbisect.example/bisects/7\n")
    );

    // No branch, and a culprit subject without a prefix.
    i.repository.branch = None;
    i.subject_prefix = None;
    if let Outcome::Found { culprit, .. } = &mut i.outcome {
        culprit.subject = "Revert the change: it broke things".into();
    }
    assert!(report(&i).subject.starts_with("[linus]  b5501f970d:  "));
}

#[test]
fn html_escapes_everything() {
    let mut i = input("will-it-scale.per_process_ops", &HIGH, &LOW);
    if let Outcome::Found { culprit, .. } = &mut i.outcome {
        culprit.subject = "x86: <script>alert('pwn')</script> & \"more\"".into();
    }
    i.job
        .parameters
        .push(("mode".into(), "<b>bold</b>&amp;".into()));
    i.robot.name = "robot <x>".into();
    i.repository.url = "javascript:alert(1)".into();
    i.dashboard_url = Some("https://example/?a=1&b=<2>".into());
    let r = report(&i);
    assert!(!r.html.contains("<script>"));
    assert!(!r.html.contains("<b>bold"));
    assert!(!r.html.contains("robot <x>"));
    assert!(
        r.html
            .contains("&lt;script&gt;alert(&#39;pwn&#39;)&lt;/script&gt; &amp; &quot;more&quot;")
    );
    assert!(r.html.contains("&lt;b&gt;bold&lt;/b&gt;&amp;amp;"));
    assert!(r.html.contains("robot &lt;x&gt;"));
    // Only http(s) URLs become links; their attribute is escaped too.
    assert!(!r.html.contains("href=\"javascript:"));
    assert!(
        r.html
            .contains("href=\"https://example/?a=1&amp;b=&lt;2&gt;\"")
    );
    // The text body is not escaped.
    assert!(r.text.contains("\tmode: <b>bold</b>&amp;\n"));
    // The SVG is embedded, the table in a <pre>.
    assert!(r.html.contains("<svg xmlns="));
    assert!(r.html.contains("<pre>=========="));
    assert!(r.html.starts_with("<!DOCTYPE html>"));
}

#[test]
fn trailing_spaces_only_where_lkp_has_them() {
    let mut i = input("will-it-scale.per_process_ops", &HIGH, &LOW);
    if let Outcome::Found { runs, .. } = &mut i.outcome {
        runs.failures.push(FailureCount {
            stat: "dmesg.WARNING:at_mm/vmscan.c".into(),
            parent: 0,
            culprit: 3,
        });
    }
    let r = report(&i);
    let allowed = [
        "commit: ",
        "-- ",
        "             \\          |                \\  ",
        "           |             |             |    ",
    ];
    for line in r.text.lines() {
        if line.trim_end() != line {
            let ok = allowed.contains(&line)
                || line.starts_with("---------------- ")
                || line.starts_with(&format!("{} ", &sha40("bbbb")[..16]));
            assert!(ok, "unexpected trailing space: {line:?}");
        }
    }
    assert!(
        r.text.contains(
            "           :4           75%           3:4     dmesg.WARNING:at_mm/vmscan.c\n"
        )
    );
}

#[test]
fn additions_get_a_box_and_their_own_table() {
    let mut i = input("will-it-scale.per_process_ops", &LOW, &HIGH);
    let mut job = fio_job();
    job.testcase = "stress-ng".into();
    job.tbox_group = Some("lkp-spr-2sp4".into());
    job.parameters = common::params(&[("test", "fiemap"), ("nr_threads", "100%")]);
    if let Outcome::Found { also, .. } = &mut i.outcome {
        also.push(Addition {
            job,
            machine: Machine {
                nr_threads: Some(224),
                sockets: Some(2),
                ..Machine::default()
            },
            metric: "stress-ng.fiemap.ops_per_sec".into(),
            direction: None,
            runs: Runs {
                parent: runs_of("stress-ng.fiemap.ops_per_sec", &LOW),
                culprit: runs_of("stress-ng.fiemap.ops_per_sec", &[90.0, 91.0, 89.0, 90.0]),
                failures: Vec::new(),
            },
        });
    }
    let r = report(&i);
    assert_eq!(r.also.len(), 1);
    assert_eq!(r.also[0].headline.verdict, Verdict::Regression);
    let t = &r.text;
    assert!(t.contains(
        "In addition to that, the commit also has significant impact on the following tests:\n"
    ));
    assert!(t.contains(
        "| testcase: change | stress-ng: stress-ng.fiemap.ops_per_sec 10.0% regression |\n"
    ));
    assert!(t.contains("| test machine     | 224 threads 2 sockets"));
    assert!(t.contains("| test parameters  | test=fiemap "));
    assert!(t.contains("|                  | nr_threads=100% "));
    assert!(t.contains("lkp-spr-2sp4: 224 threads 2 sockets\n"));
    assert_eq!(t.matches("=========================================================================================\n").count(), 2);
    // Box lines all have the same width.
    let widths: Vec<usize> = t
        .lines()
        .filter(|l| l.starts_with('|') && l.ends_with('|') || l.starts_with("+-"))
        .map(|l| l.chars().count())
        .collect();
    assert!(widths.len() >= 5 && widths.iter().all(|w| *w == widths[0]));
}

#[test]
fn not_reproduced_reports_both_endpoints() {
    let mut i = input("fio.write_iops", &LOW, &LOW);
    let mut bad_runs = runs_of("fio.write_iops", &[100.5, 99.0, 101.5, 100.0]);
    bad_runs.push(Run {
        completed: false,
        metrics: BTreeMap::new(),
    });
    i.outcome = Outcome::NotReproduced {
        good_runs: runs_of("fio.write_iops", &LOW),
        bad_runs,
    };
    let r = report(&i);
    assert_eq!(r.kind, OutcomeKind::NotReproduced);
    assert_eq!(
        r.subject,
        "[linux:master] fio.write_iops: not reproduced in aaaa000000..cccc000000"
    );
    assert!(
        r.text
            .contains("could not reproduce a change of fio.write_iops")
    );
    let [good, bad] = r.endpoints.as_ref().unwrap();
    assert_eq!((good.n, bad.n, bad.incomplete), (4, 4, 1));
    assert!((good.mean - 100.0).abs() < 1e-9);
    assert!(
        r.text
            .contains("good  aaaa000000    4      100.00     0.8%\n"),
        "{}",
        r.text
    );
    assert!(
        r.text.contains(
            "bad   cccc000000    4      100.25     1.0%  (1 incomplete run(s) left out)\n"
        )
    );
    assert!(r.text.contains("The means differ by +0.2%"));
    assert!(!r.text.contains("Reported-by"));
    assert!(r.text_plot.is_some() && r.svg_plot.is_some());
}

#[test]
fn inconclusive_lists_candidates_with_probabilities() {
    let mut i = input("fio.write_iops", &LOW, &HIGH);
    i.outcome = Outcome::Inconclusive {
        candidates: vec![
            Candidate {
                commit: commit(CULPRIT, "jbd2: avoid false sharing"),
                probability: 0.62,
            },
            Candidate {
                commit: commit(&sha40("dddd"), "ext4: <other>"),
                probability: 0.301,
            },
        ],
        target: 0.99,
    };
    i.samples = vec![CommitSamples {
        sha: sha40("aaaa"),
        judged: Judgement::Good,
        values: LOW.to_vec(),
    }];
    let r = report(&i);
    assert_eq!(r.kind, OutcomeKind::Inconclusive);
    assert!(
        r.subject
            .contains("inconclusive bisect of aaaa000000..cccc000000")
    );
    assert!(
        r.text
            .replace('\n', " ")
            .contains("with the 99.0% confidence asked for.")
    );
    assert!(
        r.text
            .contains("   62.0%  b5501f970d (\"jbd2: avoid false sharing\")\n")
    );
    assert!(
        r.text
            .contains("   30.1%  dddd000000 (\"ext4: <other>\")\n")
    );
    assert!(r.html.contains("ext4: &lt;other&gt;"));
    assert!(r.text_plot.is_some());
}

#[test]
fn failed_says_why() {
    let mut i = input("fio.write_iops", &LOW, &HIGH);
    i.outcome = Outcome::Failed {
        reason: "the good endpoint does not build:\nerror: implicit declaration".into(),
    };
    let r = report(&i);
    assert_eq!(r.kind, OutcomeKind::Failed);
    assert!(
        r.subject
            .ends_with("fio.write_iops: bisect of aaaa000000..cccc000000 failed")
    );
    assert!(
        r.text
            .contains("    the good endpoint does not build:\n    error: implicit declaration\n")
    );
    assert!(
        r.html
            .contains("<pre>the good endpoint does not build:\nerror: implicit declaration</pre>")
    );
    assert!(r.table.is_none() && r.text_plot.is_none());
}

#[test]
fn missing_metric_and_bad_ids_are_errors() {
    let i = input("fio.write_iops", &LOW, &HIGH);
    let mut missing = i.clone();
    missing.metric = "fio.read_iops".into();
    assert!(matches!(
        render(&missing, &ReportConfig::default()),
        Err(ReportError::MetricMissing { .. })
    ));
    let mut bad = i.clone();
    bad.good.sha = "not-a-sha".into();
    assert_eq!(
        render(&bad, &ReportConfig::default()).unwrap_err(),
        ReportError::BadCommitId {
            sha: "not-a-sha".into()
        }
    );
}

#[test]
fn input_and_report_round_trip_through_json() {
    let i = input("will-it-scale.per_process_ops", &HIGH, &LOW);
    let json = serde_json::to_string(&i).unwrap();
    assert!(json.contains("\"kind\":\"found\""));
    let back: ReportInput = serde_json::from_str(&json).unwrap();
    assert_eq!(back, i);

    let r = report(&i);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["kind"], "found");
    assert_eq!(json["headline"]["verdict"], "regression");
    assert_eq!(
        json["table"]["rows"][0]["stat"],
        "will-it-scale.per_process_ops"
    );
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn minimal_json_input_uses_defaults() {
    let json = r#"{
        "repository": {"url": "https://example.org/app.git"},
        "good": {"sha": "aaaaaaaaaa", "subject": "old"},
        "bad": {"sha": "cccccccccc", "subject": "new"},
        "job": {"testcase": "app"},
        "metric": "app.latency",
        "outcome": {"kind": "found",
            "culprit": {"sha": "bbbbbbbbbb", "subject": "app: slow path"},
            "parent": {"sha": "9999999999", "subject": "app: fast path"},
            "runs": {
                "parent": [{"metrics": {"app.latency": 10}}, {"metrics": {"app.latency": 11}}],
                "culprit": [{"metrics": {"app.latency": 20}}, {"metrics": {"app.latency": 21}}]
            }}
    }"#;
    let i: ReportInput = serde_json::from_str(json).unwrap();
    let r = render(&i, &ReportConfig::default()).unwrap();
    assert_eq!(
        r.subject,
        "[app] [app]  bbbbbbbbbb:  app.latency 95.2% regression"
    );
    assert!(r.text.contains("test machine: unknown\n"));
    assert!(r.text.contains("perfbisect noticed a 95.2% regression"));
    // No config, no compiler lines for a userspace project.
    assert!(!r.text.contains("config:") && !r.text.contains("compiler:"));
    // No dashboard link: Reported-by without Closes.
    assert!(r.text.contains("| Reported-by: perfbisect\n\n"));
}

#[test]
fn kpi_tables_deserialize_from_lists_and_lkp_style_maps() {
    let list: KpiTable = serde_json::from_str(
        r#"[{"pattern": "a.*", "direction": "higher_is_better"}, {"pattern": "b", "direction": "lower"}]"#,
    )
    .unwrap();
    assert_eq!(list.direction("a.x"), Some(Direction::HigherIsBetter));
    assert_eq!(list.direction("b"), Some(Direction::LowerIsBetter));
    // index-perf-all.yaml style: 1 / -1, in order.
    let map: KpiTable = serde_json::from_str(r#"{"z.*": -1, "z.ops": 1}"#).unwrap();
    assert_eq!(map.direction("z.ops"), Some(Direction::LowerIsBetter));
    assert!(serde_json::from_str::<KpiTable>(r#"{"x": 0}"#).is_err());
    assert!(serde_json::from_str::<KpiTable>(r#"{"x": "sideways"}"#).is_err());
}

#[test]
#[ignore = "prints examples of each outcome for a human to read"]
fn print_examples() {
    let mut i = input("will-it-scale.per_process_ops", &HIGH, &LOW);
    if let Outcome::Found { runs, .. } = &mut i.outcome {
        runs.failures.push(FailureCount {
            stat: "dmesg.WARNING:at_mm/vmscan.c".into(),
            parent: 0,
            culprit: 3,
        });
    }
    println!("{}\n\n{}", report(&i).subject, report(&i).text);
    let mut nr = i.clone();
    nr.outcome = Outcome::NotReproduced {
        good_runs: runs_of("will-it-scale.per_process_ops", &LOW),
        bad_runs: runs_of(
            "will-it-scale.per_process_ops",
            &[100.5, 99.0, 101.5, 100.0],
        ),
    };
    println!("=====\n{}\n\n{}", report(&nr).subject, report(&nr).text);
    let mut inc = i.clone();
    inc.outcome = Outcome::Inconclusive {
        candidates: vec![Candidate {
            commit: commit(CULPRIT, "jbd2: avoid false sharing"),
            probability: 0.62,
        }],
        target: 0.99,
    };
    println!("=====\n{}\n\n{}", report(&inc).subject, report(&inc).text);
    let mut f = i.clone();
    f.outcome = Outcome::Failed {
        reason: "no host in group lkp-icl-2sp9 answered for 24h".into(),
    };
    println!("=====\n{}\n\n{}", report(&f).subject, report(&f).text);
}

#[test]
#[ignore = "prints an HTML body for a human to read"]
fn print_html() {
    let r = report(&input("will-it-scale.per_process_ops", &HIGH, &LOW));
    println!("{}", r.html);
}

#[test]
fn config_reads_from_yaml_like_lkps_index_files() {
    let yaml = "
kpi:
  myapp.ops: 1
  myapp.*_ns: -1
builtin_kpis: false
rows:
  min_samples: 2
  exclude: ['vmstat.*']
";
    let config: ReportConfig = yaml_serde::from_str(yaml).unwrap();
    let kpi = config.kpi_table();
    assert_eq!(kpi.direction("myapp.ops"), Some(Direction::HigherIsBetter));
    assert_eq!(
        kpi.direction("myapp.wait_ns"),
        Some(Direction::LowerIsBetter)
    );
    assert_eq!(
        kpi.direction("fio.write_iops"),
        None,
        "built-ins switched off"
    );
    assert_eq!(config.rows.min_samples, 2);
    assert_eq!(
        config.rows.min_perf_change, 0.01,
        "unset fields keep their defaults"
    );
}

#[test]
fn the_verdict_gives_the_probability_unrounded_and_the_comparison_behind_it() {
    let mut i = input("will-it-scale.per_process_ops", &LOW, &HIGH);
    if let Outcome::Found { confidence, .. } = &mut i.outcome {
        *confidence = Some(0.9998);
    }
    let r = report(&i);
    assert!(
        !r.text.contains("100.0%"),
        "0.9998 is not certainty:\n{}",
        r.text
    );
    let start = r
        .text
        .find("The bisect gives")
        .expect("the verdict sentence");
    let verdict = &r.text[start..start + r.text[start..].find("\n\n").unwrap()];
    let one_line = verdict.replace('\n', " ");
    assert!(one_line.contains("a 99.98% probability"), "{verdict}");
    assert!(one_line.contains("4 + 4 runs"), "{verdict}");
    assert!(one_line.contains("Welch's t-test p = "), "{verdict}");
    assert!(
        verdict.lines().all(|l| l.chars().count() <= 80),
        "prose within 80 columns:\n{verdict}"
    );
    assert!(r.html.contains("99.98% probability"));
}

#[test]
fn prose_stays_within_80_columns_for_every_outcome() {
    // Lines of prose: not the table, the boxes, the plots, the commit and URL lines.
    let prose = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.contains("  ") && !l.contains('|') && !l.contains("://"))
            .filter(|l| !l.starts_with("commit:") && !l.starts_with(' ') && !l.starts_with('\t'))
            .filter(|l| !l.starts_with('-') && !l.starts_with('='))
            .filter(|l| !l.contains('/') || l.contains(". "))
            .map(str::to_owned)
            .collect()
    };
    let mut found = input("will-it-scale.per_process_ops", &LOW, &HIGH);
    if let Outcome::Found { confidence, .. } = &mut found.outcome {
        *confidence = Some(0.97);
    }
    let mut not_reproduced = input("will-it-scale.per_process_ops", &LOW, &LOW);
    not_reproduced.outcome = Outcome::NotReproduced {
        good_runs: runs_of("will-it-scale.per_process_ops", &LOW),
        bad_runs: runs_of("will-it-scale.per_process_ops", &LOW),
    };
    let mut inconclusive = input("will-it-scale.per_process_ops", &LOW, &LOW);
    inconclusive.outcome = Outcome::Inconclusive {
        candidates: Vec::new(),
        target: 0.99,
    };
    for i in [found, not_reproduced, inconclusive] {
        let r = report(&i);
        for l in prose(&r.text) {
            assert!(l.chars().count() <= 80, "over 80 columns: {l}");
        }
    }
}

#[test]
fn a_change_found_by_a_watch_is_reported_as_fyi() {
    let mut i = input("will-it-scale.per_process_ops", &LOW, &HIGH);
    i.found_by = Some(perfbisect_report::FoundBy {
        watch: "nightly".into(),
        branch: "master".into(),
        before: "a".repeat(40),
        after: "b".repeat(40),
    });
    let r = report(&i);
    assert!(
        r.text
            .contains("FYI, we noticed a 10.0% improvement of will-it-scale.per_process_ops on:\n"),
        "{}",
        r.text
    );
    assert!(r.text.contains(
        "found by watching master (watch nightly): the change showed between heads aaaaaaaaaaaa and bbbbbbbbbbbb"
    ));
    assert!(!r.text.contains("perfbisect noticed"));
    assert!(r.html.contains("FYI, we noticed"));
    // A submitted bisect keeps the robot's own line.
    let plain = report(&input("will-it-scale.per_process_ops", &LOW, &HIGH));
    assert!(!plain.text.contains("FYI"));
}
