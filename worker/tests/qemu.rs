//! The qemu runner with a real kernel (Debian's prebuilt image) booted under software
//! emulation, a busybox initramfs, and the job appended by the worker: results come back
//! over the second serial port and are parsed; every way a boot or run can go wrong ends
//! as it should.

mod common;

use perfbisect_worker::config::QemuConfig;
use perfbisect_worker::deploy::{RunEnd, RunRequest, VmEnd, qemu};
use perfbisect_worker::exec::Ending;
use tokio::sync::watch;

fn qemu_config() -> QemuConfig {
    QemuConfig {
        binary: "qemu-system-x86_64".into(),
        accel: "tcg".into(),
    }
}

const JOB: &str = "testcase: vmbench\ntbox_group: vm\nparams: {size: 7}\nbuild: {command: 'true'}\ndeploy: {kind: qemu, kernel: vmlinuz, initrd: [rootfs.cpio], memory_mb: 256, cmdline: perfbisect.test=1}\nrun: {command: 'echo \"score: $((PERFBISECT_PARAM_SIZE * 6))\"; echo \"run: $PERFBISECT_RUN\"', format: key_value}\ntimeouts: {boot_secs: 120, run_secs: 3600}\n";

async fn boot(
    job_yaml: &str,
    prepare: impl FnOnce(&std::path::Path),
) -> perfbisect_worker::deploy::RunOutcome {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = common::vm_artifacts(tmp.path());
    prepare(&artifacts);
    let job = common::job(job_yaml);
    let req = RunRequest {
        job: &job,
        sha: "0123456789abcdef0123456789abcdef01234567",
        artifacts: &artifacts,
        env: vec![
            ("PERFBISECT_PARAM_SIZE".into(), "7".into()),
            ("PERFBISECT_RUN".into(), "2".into()),
        ],
    };
    let (_tx, mut cancel) = watch::channel(false);
    qemu::run(
        &req,
        &qemu_config(),
        None,
        &tmp.path().join("scratch"),
        &mut cancel,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn boots_the_kernel_runs_the_job_and_reads_results_and_environment() {
    let out = boot(JOB, |_| {}).await;
    let RunEnd::Ran { ending, results } = &out.end else {
        panic!("{:?}\n{}", out.end, out.log)
    };
    assert!(
        matches!(ending, Ending::Exited(0)),
        "{ending:?}\n{}",
        out.log
    );
    let metrics = perfbisect_metrics::parse(
        perfbisect_metrics::Format::KeyValue,
        "vmbench",
        results.as_deref().unwrap(),
    )
    .unwrap();
    assert_eq!(metrics["vmbench.score"], 42.0, "{metrics:?}");
    assert_eq!(metrics["vmbench.run"], 2.0);
    let env = &out.environment;
    assert_eq!(
        env.kernel_release.as_deref(),
        Some(common::debian_release().as_str())
    );
    let cmdline = env.kernel_cmdline.as_deref().unwrap();
    assert!(
        cmdline.contains("console=ttyS0") && cmdline.contains("perfbisect.test=1"),
        "{cmdline}"
    );
    assert_eq!(env.boot_method.as_deref(), Some("qemu"));
    // A VM a run: every run is the first after its deployment.
    assert_eq!(env.runs_since_deploy, Some(0));
    // The build's identity: the version string in the image's header is what the guest runs.
    assert_eq!(
        env.kernel_version,
        perfbisect_worker::initramfs::image_version(&common::debian_kernel())
    );
    // The test machine is the VM, seen from inside: 1 vCPU and at most its 256 MiB.
    let machine = env.machine.as_ref().expect("the guest's machine");
    assert_eq!(machine.threads, Some(1), "{machine:?}");
    let mem = machine.memory_bytes.unwrap();
    assert!(mem <= 256 << 20 && mem > 128 << 20, "{mem}");
    assert!(env.host.as_deref().unwrap().ends_with("-vm"), "{env:?}");
    // The run ended when the results' end marker arrived (run_secs is 3600: never waited).
    assert_eq!(out.vm_end, Some(VmEnd::ResultsMarker), "{}", out.log);
    // The console is the run's log.
    assert!(out.log.contains("results received"), "{}", out.log);
}

#[tokio::test]
async fn a_results_file_is_read_instead_of_stdout() {
    let yaml = JOB.replace(
        "run: {command: 'echo \"score: $((PERFBISECT_PARAM_SIZE * 6))\"; echo \"run: $PERFBISECT_RUN\"', format: key_value}",
        "run: {command: 'echo noise; echo \"{\\\"score\\\": 5}\" > out.json', format: json, results_file: out.json}",
    );
    let out = boot(&yaml, |_| {}).await;
    let RunEnd::Ran { results, .. } = &out.end else {
        panic!("{:?}\n{}", out.end, out.log)
    };
    assert_eq!(
        results.as_deref().map(str::trim),
        Some("{\"score\": 5}"),
        "{}",
        out.log
    );
    assert_eq!(out.vm_end, Some(VmEnd::ResultsMarker));
}

#[tokio::test]
async fn a_kernel_that_never_starts_the_job_hits_the_boot_timeout() {
    // rdinit=/bin/cat: the kernel hands PID 1 to a program that waits forever.
    let yaml = JOB
        .replace("cmdline: perfbisect.test=1", "cmdline: rdinit=/bin/cat")
        .replace("boot_secs: 120", "boot_secs: 20");
    let out = boot(&yaml, |_| {}).await;
    let RunEnd::BootFailed(reason) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert!(reason.contains("within 20 s"), "{reason}");
    assert_eq!(out.vm_end, Some(VmEnd::TimedOut));
}

#[tokio::test]
async fn another_kernel_than_the_built_one_is_a_boot_failure() {
    let out = boot(JOB, |a| {
        std::fs::write(a.join("kernel.release"), "9.9.9-perfbisect\n").unwrap()
    })
    .await;
    let RunEnd::BootFailed(reason) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert!(
        reason.contains("not the built 9.9.9-perfbisect"),
        "{reason}"
    );
    assert_eq!(out.vm_end, Some(VmEnd::ResultsMarker));
}

#[tokio::test]
async fn a_kernel_crash_mid_run_is_an_incomplete_run() {
    let yaml = JOB.replace(
        "run: {command: 'echo \"score: $((PERFBISECT_PARAM_SIZE * 6))\"; echo \"run: $PERFBISECT_RUN\"', format: key_value}",
        "run: {command: 'echo \"score: 1\"; echo c > /proc/sysrq-trigger; sleep 30', format: key_value}",
    );
    let out = boot(&yaml, |_| {}).await;
    let RunEnd::Ran { ending, results } = &out.end else {
        panic!("{:?}\n{}", out.end, out.log)
    };
    assert!(matches!(ending, Ending::Signalled), "{ending:?}");
    assert!(
        results.is_none(),
        "a crashed run has no results, never partial ones"
    );
    assert!(
        out.log.contains("sysrq") || out.log.contains("Kernel panic"),
        "{}",
        out.log
    );
    // panic=-1 reboots, and -no-reboot turns that into qemu's own exit.
    assert!(
        matches!(out.vm_end, Some(VmEnd::GuestExited(_))),
        "{:?}",
        out.vm_end
    );
}

#[tokio::test]
async fn a_run_past_its_timeout_is_stopped() {
    let yaml = JOB
        .replace(
            "run: {command: 'echo \"score: $((PERFBISECT_PARAM_SIZE * 6))\"; echo \"run: $PERFBISECT_RUN\"', format: key_value}",
            "run: {command: 'sleep 600', format: key_value}",
        )
        .replace("run_secs: 3600", "run_secs: 3");
    let out = boot(&yaml, |_| {}).await;
    let RunEnd::Ran { ending, results } = &out.end else {
        panic!("{:?}\n{}", out.end, out.log)
    };
    assert!(matches!(ending, Ending::TimedOut), "{ending:?}");
    assert!(results.is_none());
    assert_eq!(out.vm_end, Some(VmEnd::TimedOut));
}

#[tokio::test]
async fn a_missing_kernel_is_the_worker_s_problem_not_the_commit_s() {
    let tmp = tempfile::tempdir().unwrap();
    let job = common::job(JOB);
    let req = RunRequest {
        job: &job,
        sha: "0",
        artifacts: tmp.path(),
        env: vec![],
    };
    let (_tx, mut cancel) = watch::channel(false);
    let err = qemu::run(
        &req,
        &qemu_config(),
        None,
        &tmp.path().join("s"),
        &mut cancel,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("vmlinuz"), "{err}");
}
