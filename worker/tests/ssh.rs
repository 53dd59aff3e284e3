//! The ssh runner against a real sshd on loopback (started by the test with its own host and
//! client keys): files are copied over ssh, the boot goes through the `--boot-command` hook
//! (the one part that cannot be real here: this machine is not rebooted), the boot id and
//! `uname -r` are checked over ssh, the benchmark runs on the "host" and its results come
//! back. The "reboot" is the hook writing a new boot id, read by `--boot-id-command`.

mod common;

use common::sshd::{Sshd, running_release, user};

use perfbisect_worker::config::SshConfig;
use perfbisect_worker::deploy::ssh::SshHost;
use perfbisect_worker::deploy::{DeployError, RunEnd, RunOutcome, RunRequest};
use perfbisect_worker::exec::Ending;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::watch;

impl Sshd {
    fn config(&self) -> SshConfig {
        let d = self.path();
        SshConfig {
            target: Some(format!("{}@127.0.0.1", user())),
            port: self.port,
            identity: Some(d.join("client_key")),
            options: vec![
                "StrictHostKeyChecking=no".into(),
                "UserKnownHostsFile=/dev/null".into(),
                "LogLevel=ERROR".into(),
            ],
            remote_dir: d.join("remote").display().to_string(),
            // The "reboot": a new boot id, and a record of what the hook was given.
            boot_command: Some(format!(
                "env | grep ^PERFBISECT_ | sort >> {d}/hook.log; echo boot-$(date +%s%N) > {d}/boot_id",
                d = d.display()
            )),
            boot_fallback_command: None,
            power_cycle_command: None,
            power_driver: None,
            bmc_host: None,
            bmc_port: 623,
            bmc_user: "ADMIN".into(),
            bmc_password_file: None,
            bmc_cipher_suite: None,
            qmp_socket: None,
            boot_id_command: format!("cat {}/boot_id", d.display()),
        }
    }

    fn hook_calls(&self) -> usize {
        std::fs::read_to_string(self.path().join("hook.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("PERFBISECT_KERNEL="))
            .count()
    }
}

fn running_version() -> String {
    nix::sys::utsname::uname()
        .unwrap()
        .version()
        .to_string_lossy()
        .into_owned()
}

/// A build holding a kernel image whose boot header names `release` and, as its build,
/// the version of the kernel this machine runs (the "host" of these tests).
fn artifacts(dir: &Path, release: &str) -> PathBuf {
    let a = dir.join(format!("artifacts-{release}"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(
        a.join("bzImage"),
        perfbisect_worker::initramfs::fake_image_with_version(release, &running_version()),
    )
    .unwrap();
    a
}

const JOB: &str = "testcase: hostbench\ntbox_group: metal\nbuild: {command: 'true'}\ndeploy: {kind: ssh, kernel: bzImage, cmdline: 'isolcpus=1'}\nrun: {command: 'echo \"score: $PERFBISECT_PARAM_N\"', format: key_value}\ntimeouts: {boot_secs: 20, run_secs: 60}\n";

async fn run(
    host: &mut SshHost,
    job: &str,
    artifacts: &Path,
    sha: &str,
    scratch: &Path,
) -> Result<RunOutcome, DeployError> {
    let job = common::job(job);
    let req = RunRequest {
        job: &job,
        sha,
        artifacts,
        env: vec![("PERFBISECT_PARAM_N".into(), "17".into())],
    };
    let (_tx, mut cancel) = watch::channel(false);
    host.run(&req, None, scratch, &mut cancel).await
}

fn results(out: &RunOutcome) -> String {
    match &out.end {
        RunEnd::Ran {
            ending: Ending::Exited(0),
            results: Some(r),
        } => r.clone(),
        other => panic!("{other:?}\n{}", out.log),
    }
}

#[tokio::test]
async fn boots_once_through_the_hook_checks_the_kernel_and_runs_on_the_host() {
    let sshd = Sshd::start();
    let mut host = SshHost::new(&sshd.config()).unwrap();
    let a = artifacts(sshd.path(), &running_release());
    let scratch = sshd.path().join("scratch");
    let first = run(&mut host, JOB, &a, "c1", &scratch).await.unwrap();
    assert_eq!(results(&first).trim(), "score: 17");
    let env = &first.environment;
    assert_eq!(env.boot_method.as_deref(), Some("command"));
    assert_eq!(
        env.kernel_release.as_deref(),
        Some(running_release().as_str())
    );
    assert!(env.kernel_cmdline.is_some(), "{env:?}");
    // The kernel went to the host, and the hook was told where it is.
    let remote = sshd.path().join("remote/boot/vmlinuz");
    assert_eq!(
        std::fs::read(&remote).unwrap(),
        std::fs::read(a.join("bzImage")).unwrap()
    );
    let hook = std::fs::read_to_string(sshd.path().join("hook.log")).unwrap();
    assert!(
        hook.contains(&format!("PERFBISECT_KERNEL={}", remote.display())),
        "{hook}"
    );
    assert!(hook.contains("PERFBISECT_CMDLINE=isolcpus=1"), "{hook}");
    assert!(
        hook.contains(&format!("PERFBISECT_KERNEL_RELEASE={}", running_release())),
        "{hook}"
    );
    // The same commit again: the host already runs it, no second boot.
    let second = run(&mut host, JOB, &a, "c1", &scratch).await.unwrap();
    assert_eq!(results(&second).trim(), "score: 17");
    assert_eq!(sshd.hook_calls(), 1);
    assert_eq!(
        second.environment.boot_method.as_deref(),
        Some("none (already running)")
    );
    // The runner knows how soon after the boot each run came.
    assert_eq!(first.environment.runs_since_deploy, Some(0));
    assert_eq!(second.environment.runs_since_deploy, Some(1));
    // Another commit boots again, and so does the first one after it (a couple's runs on a
    // host that boots each side are each the first after a deployment).
    let third = run(&mut host, JOB, &a, "c2", &scratch).await.unwrap();
    assert_eq!(sshd.hook_calls(), 2);
    assert_eq!(third.environment.runs_since_deploy, Some(0));
    let fourth = run(&mut host, JOB, &a, "c1", &scratch).await.unwrap();
    assert_eq!(sshd.hook_calls(), 3);
    assert_eq!(fourth.environment.runs_since_deploy, Some(0));
    // A task that asks for a deployment of its own boots the commit the host already runs,
    // and its runs count from that boot; one that does not, runs on the boot it finds.
    let mut task: perfbisect_wire::worker::TaskAssignment = serde_json::from_value(
        serde_json::json!({"task_id": 1, "bisect_id": 1, "repository_url": "/r.git",
            "sha": "c1", "job": common::job(JOB), "job_hash": "h", "metric": "hostbench.score",
            "runs": 2, "lease_expires_at": chrono::Utc::now()}),
    )
    .unwrap();
    assert!(
        !task.fresh_deploy,
        "absent from an older server's assignment: false"
    );
    perfbisect_worker::task::begin_deployment(&task, Some(&mut host));
    assert!(!host.needs_boot("c1"));
    task.fresh_deploy = true;
    perfbisect_worker::task::begin_deployment(&task, Some(&mut host));
    assert!(host.needs_boot("c1"));
    let fifth = run(&mut host, JOB, &a, "c1", &scratch).await.unwrap();
    assert_eq!(sshd.hook_calls(), 4);
    assert_eq!(fifth.environment.runs_since_deploy, Some(0));
    let sixth = run(&mut host, JOB, &a, "c1", &scratch).await.unwrap();
    assert_eq!(sshd.hook_calls(), 4);
    assert_eq!(sixth.environment.runs_since_deploy, Some(1));
}

#[tokio::test]
async fn a_host_that_cannot_kexec_boots_through_the_fallback_command() {
    let sshd = Sshd::start_without_kexec();
    let mut cfg = sshd.config();
    // Before anything boots: the host's kexec is the failing stand-in, never this machine's.
    let which = std::process::Command::new("ssh")
        .args(["-p", &sshd.port.to_string(), "-i"])
        .arg(sshd.path().join("client_key"))
        .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"])
        .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
        .arg(cfg.target.as_deref().unwrap())
        .arg("command -v kexec")
        .output()
        .unwrap();
    let found = String::from_utf8_lossy(&which.stdout).trim().to_string();
    assert_eq!(
        found,
        sshd.path().join("fakebin/kexec").display().to_string(),
        "the test host's kexec is not the stand-in: {which:?}"
    );
    // kexec (no --boot-command), with the boot-once hook as the fallback.
    cfg.boot_fallback_command = cfg.boot_command.take();
    let a = artifacts(sshd.path(), &running_release());
    let mut host = SshHost::new(&cfg).unwrap();
    let out = run(&mut host, JOB, &a, "c1", &sshd.path().join("s"))
        .await
        .unwrap();
    assert_eq!(results(&out).trim(), "score: 17");
    assert_eq!(
        out.environment.boot_method.as_deref(),
        Some("command (kexec failed)")
    );
    assert!(
        out.log.contains("kexec cannot load the kernel")
            && out.log.contains("Operation not permitted"),
        "{}",
        out.log
    );
    assert_eq!(sshd.hook_calls(), 1);
    // Without a fallback, a host that cannot kexec is the host's failure, not the commit's.
    cfg.boot_fallback_command = None;
    let mut host = SshHost::new(&cfg).unwrap();
    let e = run(&mut host, JOB, &a, "c2", &sshd.path().join("s"))
        .await
        .unwrap_err();
    assert!(matches!(e, DeployError::HostDown(_)), "{e:?}");
    assert_eq!(sshd.hook_calls(), 1);
}

#[tokio::test]
async fn a_host_back_on_another_kernel_did_not_boot_the_commit() {
    let sshd = Sshd::start();
    let mut host = SshHost::new(&sshd.config()).unwrap();
    let a = artifacts(sshd.path(), "9.9.9-perfbisect");
    let out = run(&mut host, JOB, &a, "c1", &sshd.path().join("s"))
        .await
        .unwrap();
    let RunEnd::BootFailed(reason) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert!(
        reason.contains("not the built 9.9.9-perfbisect"),
        "{reason}"
    );
}

#[tokio::test]
async fn another_build_of_the_same_release_did_not_boot() {
    // Same release, another build (version): the host is not running what was built.
    let sshd = Sshd::start();
    let mut host = SshHost::new(&sshd.config()).unwrap();
    let a = sshd.path().join("other-build");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(
        a.join("bzImage"),
        perfbisect_worker::initramfs::fake_image_with_version(
            &running_release(),
            "#999 SMP Thu Jan  1 00:00:00 UTC 1970",
        ),
    )
    .unwrap();
    let out = run(&mut host, JOB, &a, "c1", &sshd.path().join("s"))
        .await
        .unwrap();
    let RunEnd::BootFailed(reason) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert!(reason.contains("another build of the kernel"), "{reason}");
}

#[tokio::test]
async fn a_host_that_does_not_come_back_is_power_cycled() {
    let sshd = Sshd::start();
    let d = sshd.path().display().to_string();
    let mut cfg = sshd.config();
    // The boot hook "hangs the host": the boot id never changes, until the power cycle.
    cfg.boot_command = Some(format!("echo boot >> {d}/hook.log"));
    cfg.power_cycle_command = Some(format!(
        "echo cycled >> {d}/power.log; echo boot-after-power > {d}/boot_id"
    ));
    let mut host = SshHost::new(&cfg).unwrap();
    let a = artifacts(sshd.path(), &running_release());
    let job = JOB.replace("boot_secs: 20", "boot_secs: 3");
    let out = run(&mut host, &job, &a, "c1", &sshd.path().join("s"))
        .await
        .unwrap();
    assert_eq!(results(&out).trim(), "score: 17");
    assert_eq!(out.environment.boot_method.as_deref(), Some("power_cycle"));
    assert_eq!(
        std::fs::read_to_string(sshd.path().join("power.log")).unwrap(),
        "cycled\n"
    );
    assert!(out.log.contains("power-cycling"), "{}", out.log);
}

#[tokio::test]
async fn a_host_lost_for_good_is_the_host_s_failure_not_the_commit_s() {
    let sshd = Sshd::start();
    let mut cfg = sshd.config();
    cfg.boot_command = Some("true".into());
    let mut host = SshHost::new(&cfg).unwrap();
    let a = artifacts(sshd.path(), &running_release());
    let job = JOB.replace("boot_secs: 20", "boot_secs: 2");
    let err = run(&mut host, &job, &a, "c1", &sshd.path().join("s"))
        .await
        .unwrap_err();
    assert!(matches!(err, DeployError::HostDown(_)), "{err}");
    assert!(err.to_string().contains("no power driver"), "{err}");
}

#[tokio::test]
async fn a_run_past_its_timeout_is_killed_on_the_host() {
    let sshd = Sshd::start();
    let mut host = SshHost::new(&sshd.config()).unwrap();
    let a = artifacts(sshd.path(), &running_release());
    let pid_file = sshd.path().join("bench.pid");
    let job = JOB
        .replace(
            "run: {command: 'echo \"score: $PERFBISECT_PARAM_N\"', format: key_value}",
            &format!(
                "run: {{command: 'sleep 600 & echo $! > {}; wait', format: key_value}}",
                pid_file.display()
            ),
        )
        .replace("run_secs: 60", "run_secs: 2");
    let out = run(&mut host, &job, &a, "c1", &sshd.path().join("s"))
        .await
        .unwrap();
    assert!(
        matches!(
            out.end,
            RunEnd::Ran {
                ending: Ending::TimedOut,
                results: None
            }
        ),
        "{:?}",
        out.end
    );
    // The benchmark's process group on the host was killed with it.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the benchmark's sleep {pid} survived its timeout"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
