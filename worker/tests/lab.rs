//! The ssh runner against a lab host: a qemu VM with sshd and kexec-tools behind a real IPMI
//! BMC simulator (see `common::lab`). One CI test does what a bare-metal lab does every day:
//! kexec into the commit's kernel and check it runs (a new boot, the job's command line, the
//! built release and version), then survive a host that hangs mid-run by power-cycling it
//! through `ipmitool -I lanplus`. The QMP driver is checked against the same VM.

mod common;

use common::lab::LabHost;
use perfbisect_worker::deploy::ssh::SshHost;
use perfbisect_worker::deploy::{RunEnd, RunRequest};
use perfbisect_worker::exec::Ending;
use perfbisect_worker::power::{PowerAction, PowerDriver, Qmp};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::watch;

/// A build of "the commit": Debian's kernel image (the lab boots the same image by default,
/// so the test tells the kexec'd kernel apart by its boot id and command line).
fn artifacts(dir: &Path) -> PathBuf {
    let a = dir.join("artifacts");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::copy(common::debian_kernel(), a.join("vmlinuz")).unwrap();
    a
}

const JOB: &str = "testcase: labbench\ntbox_group: lab\nrootfs: lab.cpio.gz\nbuild: {command: 'true'}\ndeploy: {kind: ssh, kernel: vmlinuz, cmdline: perfbisect.kexec=1}\nrun: {command: 'echo \"score: $PERFBISECT_PARAM_N\"', format: key_value}\ntimeouts: {boot_secs: 150, run_secs: 120}\n";

#[tokio::test]
async fn kexec_into_the_built_kernel_then_a_hung_host_is_power_cycled_through_ipmi() {
    let lab = LabHost::start();
    let first_boot = lab.wait_up(Duration::from_secs(300));
    // Two drivers see the same machine: the BMC and the VM's monitor.
    let status = lab.ipmitool(&["chassis", "power", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("is on"),
        "{status:?}"
    );
    let qmp = Qmp {
        socket: lab.qmp_socket(),
    };
    assert_eq!(qmp.act(PowerAction::Status).await.unwrap(), "on");

    let a = artifacts(lab.path());
    let scratch = lab.path().join("scratch");
    let mut host = SshHost::new(&lab.ssh_config()).unwrap();
    let (_tx, mut cancel) = watch::channel(false);
    let job = common::job(JOB);
    let req = RunRequest {
        job: &job,
        sha: "c1",
        artifacts: &a,
        env: vec![("PERFBISECT_PARAM_N".into(), "5".into())],
    };
    let out = host
        .run(&req, Some(&lab.rootfs_dir), &scratch, &mut cancel)
        .await
        .unwrap();
    let RunEnd::Ran {
        ending: Ending::Exited(0),
        results: Some(results),
    } = &out.end
    else {
        panic!("{:?}\n{}\n{}", out.end, out.log, lab.console())
    };
    assert_eq!(results.trim(), "score: 5");
    let env = &out.environment;
    assert_eq!(env.boot_method.as_deref(), Some("kexec"), "{env:?}");
    // The kexec'd kernel: the job's command line and the commit's mark, the built release
    // and build.
    assert!(
        env.kernel_cmdline
            .as_deref()
            .unwrap()
            .ends_with(" perfbisect.boot=c1 perfbisect.kexec=1"),
        "{env:?}"
    );
    assert!(
        env.kernel_cmdline
            .as_deref()
            .unwrap()
            .contains("perfbisect.kexec=1"),
        "{env:?}"
    );
    assert_eq!(
        env.kernel_version,
        perfbisect_worker::initramfs::image_version(&a.join("vmlinuz"))
    );
    assert_eq!(env.host.as_deref(), Some("lab-host"));
    // The test machine is the host itself: its one CPU and its memory.
    assert_eq!(env.machine.as_ref().unwrap().threads, Some(1));
    let kexec_boot = lab.wait_up(Duration::from_secs(30));
    assert_ne!(kexec_boot, first_boot, "kexec is a new boot");
    assert_eq!(lab.power_log(), ["power 1"], "no power action for a kexec");

    // The next commit, kexec'd from the kernel the last one booted: the host's own command
    // line once, the job's options once, this commit's mark.
    let req = RunRequest {
        job: &job,
        sha: "c2",
        artifacts: &a,
        env: vec![("PERFBISECT_PARAM_N".into(), "6".into())],
    };
    let out = host
        .run(&req, Some(&lab.rootfs_dir), &scratch, &mut cancel)
        .await
        .unwrap();
    assert!(
        matches!(&out.end, RunEnd::Ran { results: Some(r), .. } if r.trim() == "score: 6"),
        "{:?}\n{}\n{}",
        out.end,
        out.log,
        lab.console()
    );
    let cmdline = out.environment.kernel_cmdline.clone().unwrap();
    assert_eq!(
        cmdline.matches("perfbisect.kexec=1").count(),
        1,
        "{cmdline}"
    );
    assert_eq!(cmdline.matches("console=ttyS0").count(), 1, "{cmdline}");
    assert!(cmdline.contains("perfbisect.boot=c2"), "{cmdline}");
    assert!(!cmdline.contains("perfbisect.boot=c1"), "{cmdline}");
    let second_boot = lab.wait_up(Duration::from_secs(30));
    assert_ne!(second_boot, kexec_boot, "another kexec, another boot");
    assert_eq!(lab.power_log(), ["power 1"]);

    // The same commit again (no boot), and this time the host hangs mid-run (a kernel panic, which
    // Debian's kernel answers by hanging): the run is lost, the host is power-cycled through
    // the BMC and comes back.
    let hang = job_with_run(
        "echo \"score: 1\"; echo c > /proc/sysrq-trigger; sleep 600",
        20,
    );
    let req = RunRequest {
        job: &hang,
        sha: "c2",
        artifacts: &a,
        env: vec![],
    };
    let out = host
        .run(&req, Some(&lab.rootfs_dir), &scratch, &mut cancel)
        .await
        .unwrap();
    let RunEnd::Ran { ending, results } = &out.end else {
        panic!("{:?}\n{}", out.end, out.log)
    };
    assert!(
        matches!(ending, Ending::TimedOut | Ending::Signalled),
        "{ending:?}"
    );
    assert!(results.is_none(), "a lost run has no results");
    assert!(
        out.log.contains("power-cycling") && out.log.contains("through ipmi"),
        "{}",
        out.log
    );
    assert_eq!(host.last_power_action.as_deref(), Some("cycle (ipmi)"));
    assert_eq!(
        lab.power_log(),
        ["power 1", "power 0", "power 1"],
        "ipmitool's cycle reached the chassis"
    );
    let after = lab.wait_up(Duration::from_secs(30));
    assert_ne!(after, second_boot);
}

fn job_with_run(command: &str, run_secs: u64) -> perfbisect_wire::JobSpec {
    let mut job = common::job(JOB);
    job.run.command = command.into();
    job.timeouts.run_secs = run_secs;
    job
}

#[tokio::test]
#[ignore = "another VM boot (a minute under TCG): cargo nextest run -p perfbisect-worker --test lab --run-ignored only"]
async fn the_qmp_driver_resets_a_stopped_vm() {
    let lab = LabHost::start();
    let first = lab.wait_up(Duration::from_secs(300));
    let qmp = Qmp {
        socket: lab.qmp_socket(),
    };
    // A hung machine: its CPUs stopped. The reset brings it back with a new boot.
    qmp.execute("stop").await.unwrap();
    assert!(lab.ssh("true").is_none(), "a stopped VM does not answer");
    qmp.act(PowerAction::Cycle).await.unwrap();
    let second = lab.wait_up(Duration::from_secs(300));
    assert_ne!(first, second);
    assert_eq!(lab.power_log(), ["power 1"], "the BMC did nothing");
}
