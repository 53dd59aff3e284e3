//! Every format against real (or, where noted in fixtures/README.md, hand-written) outputs.

use perfbisect_metrics::{Format, Metrics, ParseError, detect, parse};

const FIO_RANDWRITE: &str = include_str!("fixtures/fio-randwrite.json");
const FIO_RANDRW_2JOBS: &str = include_str!("fixtures/fio-randrw-2jobs.json");
const TIME_V_DD: &str = include_str!("fixtures/time-v-dd.txt");
const TIME_V_EXIT3: &str = include_str!("fixtures/time-v-exit3.txt");
const PERF_DEFAULT: &str = include_str!("fixtures/perf-stat-default.txt");
const PERF_CSV: &str = include_str!("fixtures/perf-stat-csv.txt");
const PERF_REPEAT: &str = include_str!("fixtures/perf-stat-repeat.txt");
const PERF_INTERVAL: &str = include_str!("fixtures/perf-stat-interval.txt");
const PERF_INTERVAL_CSV: &str = include_str!("fixtures/perf-stat-interval-csv.txt");
const PERF_HYBRID: &str = include_str!("fixtures/perf-stat-hybrid.handwritten.txt");
const LKP_STATS: &str = include_str!("fixtures/lkp-stats.handwritten.json");

/// Asserts that `m` holds exactly `expected` (names and values, to 1e-9 relative).
fn assert_metrics(m: &Metrics, expected: &[(&str, f64)]) {
    let names: Vec<&str> = m.keys().map(String::as_str).collect();
    let mut want: Vec<&str> = expected.iter().map(|(k, _)| *k).collect();
    want.sort_unstable();
    assert_eq!(names, want, "metric names");
    for (name, value) in expected {
        let got = m[*name];
        let tolerance = 1e-9 * value.abs().max(1.0);
        assert!(
            (got - value).abs() <= tolerance,
            "{name}: got {got}, want {value}"
        );
    }
}

#[test]
fn fio_single_job() {
    let m = parse(Format::Fio, "ignored", FIO_RANDWRITE).unwrap();
    let expected = [
        ("fio.write_iops", 473371.628372),
        ("fio.write_bw_MBps", 1893486.0 / 1024.0),
        ("fio.write_clat_mean_ns", 1277.785843),
        ("fio.write_clat_stddev", 28234.69356),
        ("fio.write_clat_90%_ns", 1080.0),
        ("fio.write_clat_95%_ns", 1208.0),
        ("fio.write_clat_99%_ns", 1816.0),
        ("fio.write_lat_mean_ns", 1335.17507),
        ("fio.workload", 473845.0),
        ("fio.latency_2us%", 14.683283),
        ("fio.latency_4us%", 0.418913),
        ("fio.latency_10us%", 0.050227),
        ("fio.latency_20us%", 0.01),
        ("fio.latency_50us%", 0.100877),
        ("fio.latency_100us%", 0.116916),
        ("fio.latency_250us%", 0.065422),
        ("fio.latency_500us%", 0.01),
        ("fio.latency_750us%", 0.01),
        ("fio.latency_1000us%", 0.01),
        ("fio.latency_2ms%", 0.01),
        ("fio.latency_4ms%", 0.01),
        ("fio.latency_10ms%", 0.01),
        ("fio.latency_20ms%", 0.0),
        ("fio.latency_50ms%", 0.0),
        ("fio.latency_100ms%", 0.0),
        ("fio.latency_250ms%", 0.0),
        ("fio.latency_500ms%", 0.0),
        ("fio.latency_750ms%", 0.0),
        ("fio.latency_1000ms%", 0.0),
        ("fio.latency_2000ms%", 0.0),
        ("fio.latency_>=2000ms%", 0.0),
    ];
    assert_metrics(&m, &expected);
}

#[test]
fn fio_two_jobs_are_aggregated() {
    let m = parse(Format::Fio, "fio", FIO_RANDRW_2JOBS).unwrap();
    // Expected values computed from the fixture independently of this crate.
    let checks = [
        ("fio.read_iops", 20644.355645),
        ("fio.read_bw_MBps", 80.640625),
        ("fio.read_clat_mean_ns", 86479.3854344509),
        ("fio.read_clat_stddev", 94738.91171589847),
        ("fio.read_clat_90%_ns", 117248.0),
        ("fio.read_clat_95%_ns", 139265.63522864747),
        ("fio.read_clat_99%_ns", 282633.81137188483),
        ("fio.read_lat_mean_ns", 86736.08516800425),
        ("fio.write_iops", 8978.021978),
        ("fio.write_bw_MBps", 35.0693359375),
        ("fio.write_clat_mean_ns", 3492.794926149216),
        ("fio.write_clat_stddev", 5865.228790408303),
        ("fio.write_clat_90%_ns", 4447.366195615889),
        ("fio.write_clat_99%_ns", 30471.619895404474),
        ("fio.write_lat_mean_ns", 3585.825303241794),
        ("fio.workload", 29652.0),
        ("fio.latency_100us%", 44.09820582048428),
    ];
    for (name, want) in checks {
        let got = m[name];
        assert!(
            (got - want).abs() <= 1e-9 * want.abs(),
            "{name}: got {got}, want {want}"
        );
    }
    assert!(
        !m.keys().any(|k| k.starts_with("fio.trim_")),
        "trim did no I/O"
    );
    assert!(
        !m.keys().any(|k| k.contains("slat")),
        "psync has no submission latency"
    );
}

#[test]
fn fio_json_after_warnings_is_found() {
    let text = format!(
        "note: both iodepth >= 1 and synchronous I/O engine are selected\n{FIO_RANDWRITE}\nfio: trailing line\n"
    );
    assert_eq!(detect(&text), Format::Fio);
    let m = parse(Format::Auto, "x", &text).unwrap();
    assert_eq!(m, parse(Format::Fio, "x", FIO_RANDWRITE).unwrap());
}

#[test]
fn time_v() {
    let m = parse(Format::TimeV, "ignored", TIME_V_DD).unwrap();
    let expected = [
        ("time.user_time", 0.0),
        ("time.system_time", 0.25),
        ("time.percent_of_cpu_this_job_got", 78.0),
        ("time.elapsed_time", 0.32),
        ("time.average_shared_text_size", 0.0),
        ("time.average_unshared_data_size", 0.0),
        ("time.average_stack_size", 0.0),
        ("time.average_total_size", 0.0),
        ("time.maximum_resident_set_size", 2800.0),
        ("time.average_resident_set_size", 0.0),
        ("time.major_page_faults", 1.0),
        ("time.minor_page_faults", 359.0),
        ("time.voluntary_context_switches", 16.0),
        ("time.involuntary_context_switches", 20.0),
        ("time.swaps", 0.0),
        ("time.file_system_inputs", 232.0),
        ("time.file_system_outputs", 131104.0),
        ("time.socket_messages_sent", 0.0),
        ("time.socket_messages_received", 0.0),
        ("time.signals_delivered", 0.0),
        ("time.page_size", 4096.0),
        ("time.exit_status", 0.0),
    ];
    assert_metrics(&m, &expected);
    let m = parse(Format::TimeV, "ignored", TIME_V_EXIT3).unwrap();
    assert_eq!(m["time.exit_status"], 3.0);
}

#[test]
fn time_v_long_elapsed() {
    let text = TIME_V_DD.replace("m:ss): 0:00.32", "m:ss): 1:02:03");
    let m = parse(Format::TimeV, "", &text).unwrap();
    assert_eq!(m["time.elapsed_time"], 3723.0);
}

#[test]
fn perf_stat_human() {
    let m = parse(Format::PerfStat, "ignored", PERF_DEFAULT).unwrap();
    assert_metrics(
        &m,
        &[
            ("perf-stat.task-clock", 36.70),
            ("perf-stat.context-switches", 1.0),
            ("perf-stat.cpu-migrations", 0.0),
            ("perf-stat.page-faults", 96.0),
            ("perf-stat.elapsed_time", 0.037277280),
            ("perf-stat.user_time", 0.0),
            ("perf-stat.system_time", 0.037387),
        ],
    );
}

#[test]
fn perf_stat_csv() {
    let m = parse(Format::PerfStat, "ignored", PERF_CSV).unwrap();
    assert_metrics(
        &m,
        &[
            ("perf-stat.task-clock", 40.62),
            ("perf-stat.context-switches", 2.0),
            ("perf-stat.cpu-migrations", 0.0),
            ("perf-stat.page-faults", 96.0),
        ],
    );
}

#[test]
fn perf_stat_repeat() {
    let m = parse(Format::PerfStat, "ignored", PERF_REPEAT).unwrap();
    assert_metrics(
        &m,
        &[
            ("perf-stat.task-clock", 43.46),
            ("perf-stat.context-switches", 2.0),
            ("perf-stat.cpu-migrations", 0.0),
            ("perf-stat.page-faults", 97.0),
            ("perf-stat.elapsed_time", 0.04379),
        ],
    );
}

#[test]
fn perf_stat_intervals_are_summed() {
    let m = parse(Format::PerfStat, "ignored", PERF_INTERVAL).unwrap();
    assert_metrics(
        &m,
        &[
            ("perf-stat.task-clock", 411.81),
            ("perf-stat.page-faults", 159.0),
            ("perf-stat.context-switches", 4.0),
        ],
    );
    let m = parse(Format::PerfStat, "ignored", PERF_INTERVAL_CSV).unwrap();
    assert_metrics(
        &m,
        &[
            ("perf-stat.task-clock", 384.66),
            ("perf-stat.page-faults", 159.0),
        ],
    );
}

#[test]
fn perf_stat_hybrid_pmus_are_summed() {
    let m = parse(Format::PerfStat, "ignored", PERF_HYBRID).unwrap();
    assert_metrics(
        &m,
        &[
            ("perf-stat.task-clock", 12345.67),
            ("perf-stat.context-switches", 1234.0),
            ("perf-stat.cpu-migrations", 56.0),
            ("perf-stat.page-faults", 78901.0),
            ("perf-stat.cycles", 23_456_789_012.0 + 9_876_543_210.0),
            ("perf-stat.instructions", 34_567_890_123.0 + 8_765_432_109.0),
            ("perf-stat.branch-misses", 4_567_890.0),
            ("perf-stat.elapsed_time", 1.733189344),
            ("perf-stat.user_time", 10.102345),
            ("perf-stat.system_time", 2.243322),
        ],
    );
}

#[test]
fn perf_stat_all_unsupported_is_no_metrics() {
    let text = "\n Performance counter stats for 'true':\n\n   <not supported>      instructions\n   <not supported>      cycles\n";
    let err = parse(Format::PerfStat, "", text).unwrap_err();
    assert!(
        matches!(
            err,
            ParseError::NoMetrics {
                format: Format::PerfStat
            }
        ),
        "{err}"
    );
}

#[test]
fn lkp_stats_keep_their_names_and_average_arrays() {
    let m = parse(Format::LkpStats, "ignored", LKP_STATS).unwrap();
    assert_metrics(
        &m,
        &[
            ("aim7.jobs-per-min", 539418.0),
            ("aim7.time.elapsed_time", 33.57),
            ("aim7.time.elapsed_time.max", 33.57),
            ("aim7.time.voluntary_context_switches", 912022.0),
            ("vmstat.cpu.id", 24.75),
            ("mpstat.cpu.all.iowait%", 0.0),
            ("numa-numastat.node1.local_node", 4767597.0),
        ],
    );
    // As plain JSON the same file is put under the program.
    let m = parse(Format::Json, "lkp", LKP_STATS).unwrap();
    assert!(m.contains_key("lkp.aim7.jobs-per-min"), "{m:?}");
}

#[test]
fn auto_detects_every_fixture() {
    let cases = [
        (FIO_RANDWRITE, Format::Fio),
        (FIO_RANDRW_2JOBS, Format::Fio),
        (TIME_V_DD, Format::TimeV),
        (TIME_V_EXIT3, Format::TimeV),
        (PERF_DEFAULT, Format::PerfStat),
        (PERF_CSV, Format::PerfStat),
        (PERF_REPEAT, Format::PerfStat),
        (PERF_INTERVAL, Format::PerfStat),
        (PERF_INTERVAL_CSV, Format::PerfStat),
        (PERF_HYBRID, Format::PerfStat),
        (LKP_STATS, Format::LkpStats),
        (r#"{"ops": 1, "lat": {"p99": 2}}"#, Format::Json),
        ("ops: 12\nlatency_ms=3\n", Format::KeyValue),
        ("", Format::KeyValue),
    ];
    for (i, (text, format)) in cases.into_iter().enumerate() {
        assert_eq!(detect(text), format, "case {i}");
        if !text.is_empty() {
            assert_eq!(
                parse(Format::Auto, "bench", text).unwrap(),
                parse(format, "bench", text).unwrap(),
                "case {i}"
            );
        }
    }
}

#[test]
fn auto_on_broken_json_reports_the_json_error() {
    let err = parse(Format::Auto, "p", "{\"ops\": 1,").unwrap_err();
    assert!(matches!(err, ParseError::Json { .. }), "{err}");
    assert!(err.to_string().starts_with("invalid JSON: "), "{err}");
}

#[test]
fn garbage_is_no_metrics_in_every_text_format() {
    let garbage = "\u{feff}Segmentation fault (core dumped)\n%%%% ::: === ,,,,\n\t\u{7f}\n";
    for format in [
        Format::Auto,
        Format::KeyValue,
        Format::TimeV,
        Format::PerfStat,
    ] {
        let err = parse(format, "p", garbage).unwrap_err();
        assert!(
            matches!(err, ParseError::NoMetrics { .. }),
            "{format}: {err}"
        );
    }
    assert!(matches!(
        parse(Format::Fio, "p", garbage),
        Err(ParseError::NoFioJson)
    ));
    assert!(matches!(
        parse(Format::Json, "p", garbage),
        Err(ParseError::Json { .. })
    ));
}

#[test]
fn a_truncated_run_is_not_silently_accepted() {
    // fio killed halfway through writing its JSON.
    let half = &FIO_RANDWRITE[..FIO_RANDWRITE.len() / 2];
    assert!(matches!(
        parse(Format::Fio, "", half),
        Err(ParseError::Json { .. })
    ));
    // A format given explicitly does not fall back to another one.
    assert!(matches!(
        parse(Format::TimeV, "", PERF_DEFAULT),
        Err(ParseError::NoMetrics {
            format: Format::TimeV
        })
    ));
}

const CALLGRIND_DEFAULT: &str = include_str!("fixtures/callgrind-default.txt");
const CALLGRIND_SIM: &str = include_str!("fixtures/callgrind-cache-branch-sim.txt");

#[test]
fn callgrind_instruction_counts_without_a_wrapper_script() {
    // The program's own `score:` line is on stdout, mixed in; only valgrind's lines count.
    assert_eq!(detect(CALLGRIND_DEFAULT), Format::Callgrind);
    let m = parse(Format::Auto, "demo", CALLGRIND_DEFAULT).unwrap();
    assert_metrics(
        &m,
        &[("callgrind.Ir", 325999.0), ("callgrind.I_refs", 325999.0)],
    );
}

#[test]
fn callgrind_with_cache_and_branch_simulation() {
    let m = parse(Format::Callgrind, "ignored", CALLGRIND_SIM).unwrap();
    assert_eq!(m["callgrind.Ir"], 325999.0);
    assert_eq!(m["callgrind.Bcm"], 3184.0);
    assert_eq!(m["callgrind.I_refs"], 325999.0);
    assert_eq!(
        m["callgrind.D_refs"], 39500.0,
        "the rd + wr split is left out"
    );
    assert_eq!(m["callgrind.LL_misses"], 2572.0);
    assert_eq!(m["callgrind.Branches"], 125789.0);
    assert_eq!(m["callgrind.D1_miss_rate%"], 4.0);
    assert_eq!(m["callgrind.Mispred_rate%"], 2.7);
    assert_eq!(m.len(), 13 + 16, "13 events and 16 summary lines: {m:?}");
    assert!(!m.keys().any(|k| k.contains("Command")), "{m:?}");
}
