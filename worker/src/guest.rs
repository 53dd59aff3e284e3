//! What runs on the booted system (a qemu VM or an ssh host), and how its report is read.
//!
//! `bench` reports the system (release, command line, governor, microcode), runs the job's
//! command once and prints its results between markers; its standard output is the results
//! channel (a second serial port in qemu, the ssh session's stdout), its standard error the
//! log. In qemu, `init` (PID 1) mounts the basics, says it booted, runs `bench` and powers
//! off.

use perfbisect_wire::JobSpec;
use perfbisect_wire::worker::RunEnvironment;

pub const BOOTED: &str = "perfbisect-booted";
const ENV_PREFIX: &str = "perfbisect-env-";
const BEGIN: &str = "perfbisect-results-begin";
const END: &str = "perfbisect-results-end: ";

/// Runs the job once in the directory given as `$1` (holding `env` and `run`).
pub const BENCH_SH: &str = r#"#!/bin/sh
D="$1"
. "$D/env"
echo "perfbisect-env-release: $(uname -r)"
echo "perfbisect-env-cmdline: $(cat /proc/cmdline)"
echo "perfbisect-env-host: $(uname -n)"
g=$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null) && echo "perfbisect-env-governor: $g"
m=$(grep -m1 '^microcode' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//')
[ -n "$m" ] && echo "perfbisect-env-microcode: $m"
mkdir -p "$D/work" && cd "$D/work" || exit 1
if [ -n "${PERFBISECT_RESULTS_FILE:-}" ]; then
  sh "$D/run" >&2
  code=$?
  out="$PERFBISECT_RESULTS_FILE"
else
  sh "$D/run" > "$D/stdout"
  code=$?
  out="$D/stdout"
fi
echo perfbisect-results-begin
cat "$out" 2>/dev/null
[ -n "$(tail -c 1 "$out" 2>/dev/null)" ] && echo
echo "perfbisect-results-end: $code"
"#;

/// PID 1 of a qemu guest: the results channel is the second serial port.
pub const INIT_SH: &str = r#"#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo perfbisect-booted > /dev/ttyS1
sh /perfbisect/bench /perfbisect > /dev/ttyS1 2> /dev/console
poweroff -f 2>/dev/null || echo o > /proc/sysrq-trigger
"#;

/// Single-quotes `s` for sh.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The `env` file: the job's variables, exported.
pub fn env_file(env: &[(String, String)], job: &JobSpec) -> String {
    let mut s = String::new();
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", quote(v)));
    }
    if let Some(f) = &job.run.results_file {
        s.push_str(&format!("export PERFBISECT_RESULTS_FILE={}\n", quote(f)));
    }
    s
}

/// What the booted system reported.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub booted: bool,
    pub environment: RunEnvironment,
    /// The text between the markers, when the job got that far.
    pub results: Option<String>,
    /// The run command's exit status, when it finished.
    pub exit: Option<i32>,
}

pub fn parse(text: &str) -> Report {
    let mut report = Report::default();
    let mut results: Option<Vec<&str>> = None;
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some(lines) = results.as_mut() {
            if let Some(code) = line.strip_prefix(END) {
                report.exit = code.trim().parse().ok();
                report.results = Some(lines.join("\n") + if lines.is_empty() { "" } else { "\n" });
                results = None;
            } else {
                lines.push(line);
            }
            continue;
        }
        if line == BOOTED {
            report.booted = true;
        } else if line == BEGIN {
            report.booted = true;
            results = Some(Vec::new());
        } else if let Some(rest) = line.strip_prefix(ENV_PREFIX) {
            report.booted = true;
            let Some((key, value)) = rest.split_once(": ") else {
                continue;
            };
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            let env = &mut report.environment;
            match key {
                "release" => env.kernel_release = value,
                "cmdline" => env.kernel_cmdline = value,
                "host" => env.host = value,
                "governor" => env.cpu_governor = value,
                "microcode" => env.microcode = value,
                _ => {}
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_whole_report_with_serial_line_endings() {
        let text = "perfbisect-booted\r\nperfbisect-env-release: 6.1.0-57-amd64\r\nperfbisect-env-cmdline: console=ttyS0 quiet\r\nperfbisect-env-microcode: 0x1\r\nperfbisect-results-begin\r\nscore: 42\r\nops: 7\r\nperfbisect-results-end: 0\r\n";
        let r = parse(text);
        assert!(r.booted);
        assert_eq!(r.exit, Some(0));
        assert_eq!(r.results.as_deref(), Some("score: 42\nops: 7\n"));
        assert_eq!(
            r.environment.kernel_release.as_deref(),
            Some("6.1.0-57-amd64")
        );
        assert_eq!(
            r.environment.kernel_cmdline.as_deref(),
            Some("console=ttyS0 quiet")
        );
        assert_eq!(r.environment.microcode.as_deref(), Some("0x1"));
        assert_eq!(r.environment.cpu_governor, None);
    }

    #[test]
    fn a_run_cut_short_has_no_results() {
        let r = parse("perfbisect-booted\nperfbisect-results-begin\nscore: 4");
        assert!(r.booted);
        assert_eq!(r.results, None);
        assert_eq!(r.exit, None);
        assert!(!parse("").booted);
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
