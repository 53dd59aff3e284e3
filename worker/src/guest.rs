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
echo "perfbisect-env-version: $(uname -v)"
echo "perfbisect-env-host: $(uname -n)"
echo "perfbisect-env-threads: $(grep -c '^processor' /proc/cpuinfo)"
echo "perfbisect-env-sockets: $(grep '^physical id' /proc/cpuinfo | sort -u | wc -l)"
echo "perfbisect-env-cpu_model: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')"
echo "perfbisect-env-memory_kb: $(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo)"
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

/// PID 1 of a qemu guest: the results channel is the second serial port. The guest names
/// itself (`perfbisect.hostname=` on the command line), so runs do not record `(none)`.
/// The worker stops the VM as soon as the results' end marker arrives; the guest's own
/// exits (isa-debug-exit, then poweroff, then reboot, which `-no-reboot` turns into an
/// exit) only matter when the marker never comes, and any of them ends qemu even on a
/// kernel without ACPI.
pub const INIT_SH: &str = r#"#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
for a in $(cat /proc/cmdline); do
  case "$a" in perfbisect.hostname=*) hostname "${a#perfbisect.hostname=}" ;; esac
done
echo perfbisect-booted > /dev/ttyS1
sh /perfbisect/bench /perfbisect > /dev/ttyS1 2> /dev/console
printf '\001' | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f 2>/dev/null
reboot -f 2>/dev/null || echo b > /proc/sysrq-trigger
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
                "version" => env.kernel_version = value,
                // An initramfs that never set a hostname says `(none)`: no identity.
                "host" => env.host = value.filter(|v| v != "(none)"),
                "threads" | "sockets" | "cpu_model" | "memory_kb" => {
                    let m = env.machine.get_or_insert_with(Default::default);
                    let number = value.as_deref().and_then(|v| v.parse::<u64>().ok());
                    match key {
                        "threads" => m.threads = number.filter(|&n| n > 0).map(|n| n as u32),
                        // A VM's cpuinfo has no `physical id`: one socket.
                        "sockets" => m.sockets = Some(number.unwrap_or(0).max(1) as u32),
                        "cpu_model" => m.cpu_model = value,
                        _ => m.memory_bytes = number.map(|kb| kb * 1024),
                    }
                }
                "governor" => env.cpu_governor = value,
                "microcode" => env.microcode = value,
                _ => {}
            }
        }
    }
    if let Some(m) = report.environment.machine.as_mut() {
        m.kernel = report.environment.kernel_release.clone();
    }
    report
}

/// Whether the results channel holds the whole report: the end marker's line is complete.
/// Everything after it is the guest shutting down, which the worker need not wait for.
pub fn finished(text: &str) -> bool {
    text.split('\n')
        .rev()
        .skip(1) // the part after the last newline is not a whole line yet
        .any(|l| l.trim_end_matches('\r').starts_with(END))
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
    fn the_guest_machine_and_build_come_from_the_report() {
        let text = "perfbisect-env-release: 6.1.0-pb0123\nperfbisect-env-version: #3 SMP Mon Nov 30 23:00:00 UTC 2026\nperfbisect-env-host: (none)\nperfbisect-env-threads: 2\nperfbisect-env-sockets: 0\nperfbisect-env-cpu_model: QEMU Virtual CPU version 2.5+\nperfbisect-env-memory_kb: 236000\n";
        let env = parse(text).environment;
        assert_eq!(env.host, None, "`(none)` is no hostname");
        assert_eq!(
            env.kernel_version.as_deref(),
            Some("#3 SMP Mon Nov 30 23:00:00 UTC 2026")
        );
        let m = env.machine.unwrap();
        assert_eq!(m.threads, Some(2));
        assert_eq!(m.sockets, Some(1));
        assert_eq!(m.memory_bytes, Some(236000 * 1024));
        assert_eq!(
            m.cpu_model.as_deref(),
            Some("QEMU Virtual CPU version 2.5+")
        );
        assert_eq!(m.kernel.as_deref(), Some("6.1.0-pb0123"));
    }

    #[test]
    fn the_report_is_finished_once_the_end_marker_line_is_whole() {
        assert!(!finished("perfbisect-results-begin\nscore: 1\n"));
        assert!(!finished(
            "perfbisect-results-begin\nperfbisect-results-end: 0"
        ));
        assert!(finished(
            "perfbisect-results-begin\nperfbisect-results-end: 0\r\n"
        ));
        assert!(finished("perfbisect-results-end: 1\nreboot: Power down\n"));
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
