//! Test hosts through the API, as a lab runs them: real `perfbisect server` and `perfbisect
//! worker` processes whose ssh runner drives a host, the worker's host-state reports, the
//! inventory, quarantine, and an operator's drain and release.
//!
//! The CI test's hosts are loopback sshd processes (this machine cannot be rebooted): the
//! boot is the `--boot-command` hook writing a new boot id, the power cycle the
//! `--power-cycle-command` script, a dead host one whose boot id can no longer be read. The
//! opt-in tests' hosts are the VM lab of `worker/tests/common/lab.rs`: qemu machines with
//! sshd and kexec-tools behind `ipmi_sim`, kexec'd into each commit's kernel, power-cycled
//! through `ipmitool -I lanplus`; in the longer one, each commit's kernel is built from
//! Debian's linux-source-6.1 (`worker/tests/common/linux.rs`).

mod common;
mod workerlab;

use common::Lab;
use perfbisect_cli::demo::watch;
use serde_json::Value;
use std::time::Duration;
use workerlab::sshd::{Sshd, running_release, user};
use workerlab::{eventually, linear_repo, submit, tasks, worker};

/// The job runs each host's own `bench.sh`: the run's directory is `<remote dir>/job/work`,
/// and each host's remote dir is inside its sshd directory.
const JOB: &str = "\
testcase: hostbench
tbox_group: sshlab
build: {command: sh build.sh}
deploy: {kind: ssh, kernel: vmlinuz}
run: {command: sh ../../../bench.sh, format: key_value}
runs_per_task: 2
timeouts: {build_secs: 60, boot_secs: 3, run_secs: 60}
";

/// The score moves +30% at commit 3 of 6; the build's "kernel" is a file naming the level,
/// and `kernel.release` the release the host will report (this machine's).
const BUILD_SH: &str =
    "printf 'LEVEL=%s\\n' \"$(cat level)\" > vmlinuz\nuname -r > kernel.release\n";

fn history() -> Vec<Vec<(&'static str, Option<String>)>> {
    let mut h = vec![vec![
        ("build.sh", Some(BUILD_SH.to_string())),
        ("level", Some("100\n".to_string())),
    ]];
    for i in 1..6 {
        h.push(match i {
            3 => vec![("level", Some("130\n".to_string()))],
            _ => vec![("notes", Some(format!("{i}\n")))],
        });
    }
    h
}

/// A loopback host's scripts: the boot hook (hangs while `boot-hangs` exists: no new boot
/// id), the power cycle (clears the hang; a `dead` host stays down), and the benchmark,
/// which reads the level from the "kernel" it was booted with and waits for `run-go`.
fn loopback_host(sshd: &Sshd) -> Vec<String> {
    let d = sshd.path().display().to_string();
    std::fs::write(
        sshd.path().join("boot.sh"),
        format!(
            "echo \"$PERFBISECT_KERNEL_RELEASE\" >> {d}/boots.log\n\
             [ -e {d}/boot-hangs ] && exit 0\n\
             echo boot-$(date +%s%N) > {d}/boot_id\n"
        ),
    )
    .unwrap();
    std::fs::write(
        sshd.path().join("cycle.sh"),
        format!(
            "echo \"$PERFBISECT_POWER_ACTION\" >> {d}/power.log\nrm -f {d}/boot-hangs\n\
             [ -e {d}/dead ] || echo boot-$(date +%s%N) > {d}/boot_id\n"
        ),
    )
    .unwrap();
    std::fs::write(
        sshd.path().join("bench.sh"),
        format!(
            ". {d}/remote/boot/vmlinuz\n\
             while [ ! -e {d}/run-go ]; do sleep 0.1; done\n\
             echo \"score: $((LEVEL * 1000 + $(od -An -N1 -tu1 /dev/urandom)))\"\n"
        ),
    )
    .unwrap();
    [
        "--ssh-target".to_string(),
        format!("{}@127.0.0.1", user()),
        "--ssh-port".into(),
        sshd.port.to_string(),
        "--ssh-identity".into(),
        format!("{d}/client_key"),
        "--ssh-option=StrictHostKeyChecking=no".into(),
        "--ssh-option=UserKnownHostsFile=/dev/null".into(),
        "--ssh-option=LogLevel=ERROR".into(),
        "--ssh-remote-dir".into(),
        format!("{d}/remote"),
        "--boot-command".into(),
        format!("sh {d}/boot.sh"),
        "--boot-id-command".into(),
        format!("cat {d}/boot_id"),
        "--power-driver".into(),
        "script".into(),
        "--power-cycle-command".into(),
        format!("sh {d}/cycle.sh"),
        "--host-down-pause-secs".into(),
        "2".into(),
        "--claim-wait-secs".into(),
        "2".into(),
    ]
    .into()
}

async fn inventory(lab: &Lab) -> Vec<Value> {
    reqwest::get(format!("{}/api/v1/inventory", lab.api.base()))
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

async fn host(lab: &Lab, name: &str) -> Option<Value> {
    inventory(lab).await.into_iter().find(|h| h["name"] == name)
}

/// Polls the inventory until host `name` satisfies `pred`; checks `also` on every look.
async fn host_until(
    lab: &Lab,
    name: &str,
    what: &str,
    limit: Duration,
    pred: impl Fn(&Value) -> bool,
    also: impl Fn(&[Value]),
) -> Value {
    let start = std::time::Instant::now();
    loop {
        let all = inventory(lab).await;
        also(&all);
        if let Some(h) = all.iter().find(|h| h["name"] == name && pred(h)) {
            return h.clone();
        }
        // What the host's worker saw says why, when it never gets there.
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}\ninventory: {all:#?}\nworker {name}:\n{}",
            lab.log(name)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `POST /api/v1/hosts/{id}/{action}` with `token`: the status and the body.
async fn host_action(lab: &Lab, id: i64, action: &str, token: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/hosts/{id}/{action}", lab.api.base()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn operator_token(lab: &Lab) -> String {
    std::fs::read_to_string(lab.path().join("server/operator-token"))
        .expect("the server writes its generated operator token")
        .trim()
        .to_string()
}

#[tokio::test]
async fn the_inventory_follows_what_the_workers_report_and_operators_drain_and_release() {
    let lab = Lab::new().await;
    let _server = lab.server(60).await;
    let operator = operator_token(&lab);
    let (s1, s2) = (Sshd::start(), Sshd::start());
    let repo = lab.path().join("hostbench.git");
    let shas = linear_repo(&repo, &history());
    lab.api
        .add_repository("hostbench", &repo.display().to_string())
        .await
        .unwrap();
    let args1 = loopback_host(&s1);
    let args2 = loopback_host(&s2);
    let a1: Vec<&str> = args1.iter().map(String::as_str).collect();
    let a2: Vec<&str> = args2.iter().map(String::as_str).collect();
    let _w1 = worker(&lab, "h1", "sshlab", &a1, &[]);
    let _w2 = worker(&lab, "h2", "sshlab", &a2, &[]);
    let limit = Duration::from_secs(60);
    let h1 = host_until(&lab, "h1", "h1 registered", limit, |_| true, |_| ()).await;
    assert_eq!(h1["state"], "idle", "{h1}");
    let h2 = host_until(&lab, "h2", "h2 registered", limit, |_| true, |_| ()).await;
    let (id1, id2) = (h1["id"].as_i64().unwrap(), h2["id"].as_i64().unwrap());

    // Draining is the operator's: a submitter's token is refused, the operator's drains h2,
    // which then gets no task until it is released.
    let (status, body) = host_action(&lab, id2, "drain", common::API_TOKEN).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = host_action(&lab, id2, "drain", &operator).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["drained"], true, "{body}");
    assert_eq!(body["available"], false, "{body}");
    let h2_idle = |all: &[Value]| {
        let h2 = all.iter().find(|h| h["name"] == "h2").unwrap();
        assert!(
            h2["current_task"].is_null(),
            "a drained host got a task: {h2}"
        );
        assert_eq!(h2["state"], "idle", "{h2}");
    };

    // h1's first boot hangs: the worker waits out boot_secs, power-cycles it through the
    // script driver, sees the commit's kernel and runs the job.
    std::fs::write(s1.path().join("boot-hangs"), "").unwrap();
    let bisect = submit(
        &lab,
        "hostbench",
        &shas[0],
        &shas[5],
        JOB,
        "hostbench.score",
    )
    .await;
    let booting = host_until(
        &lab,
        "h1",
        "h1 booting",
        limit,
        |h| h["state"] == "booting",
        h2_idle,
    )
    .await;
    assert!(booting["current_task"].is_i64(), "{booting}");
    let running = host_until(
        &lab,
        "h1",
        "h1 running",
        limit,
        |h| h["state"] == "running",
        h2_idle,
    )
    .await;
    assert_eq!(
        running["current_kernel"],
        running_release().as_str(),
        "{running}"
    );
    assert_eq!(running["last_power_action"], "cycle (script)", "{running}");
    assert!(running["last_power_action_at"].is_string(), "{running}");
    assert_eq!(running["failure_streak"], 0, "{running}");
    assert_eq!(
        std::fs::read_to_string(s1.path().join("power.log")).unwrap(),
        "cycle\n"
    );

    // Then h1 dies for good: its boot id cannot be read, and a power cycle does not bring
    // it back. Every task it claims goes back to the queue; three failures quarantine it.
    std::fs::write(s1.path().join("dead"), "").unwrap();
    std::fs::remove_file(s1.path().join("boot_id")).unwrap();
    std::fs::write(s1.path().join("run-go"), "").unwrap();
    let down = host_until(
        &lab,
        "h1",
        "h1 powered off",
        limit,
        |h| h["state"] == "powered_off",
        h2_idle,
    )
    .await;
    assert!(down["failure_streak"].as_i64().unwrap() >= 1, "{down}");
    let quarantined = host_until(
        &lab,
        "h1",
        "h1 quarantined",
        limit,
        |h| h["state"] == "quarantined",
        h2_idle,
    )
    .await;
    assert_eq!(quarantined["failure_streak"], 3, "{quarantined}");
    assert_eq!(quarantined["available"], false, "{quarantined}");
    assert!(
        quarantined["quarantine_reason"]
            .as_str()
            .unwrap()
            .contains("does not answer"),
        "{quarantined}"
    );
    // The host's failures spent none of the tasks' attempts, and no task was lost.
    let all = tasks(&lab, bisect.id).await;
    assert!(
        all.iter().all(|t| t.state != "failed"),
        "{all:#?}\n{}",
        lab.log("h1")
    );

    // The operator releases h2, which finishes the bisect; the quarantined h1 takes nothing.
    std::fs::write(s2.path().join("run-go"), "").unwrap();
    let (status, body) = host_action(&lab, id2, "release", &operator).await;
    assert_eq!(status, 200, "{body}");
    let done = watch(&lab.api, bisect.id, Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(done.status, "found", "{done:#?}\n{}", lab.log("h2"));
    assert_eq!(done.culprit.as_ref().unwrap().commit.sha, shas[3]);
    let all = tasks(&lab, bisect.id).await;
    // A task for a commit measured again asks for a deployment of its own: its first run
    // came from a boot, even where h2 still ran the commit. (Whether this bisect has such a
    // task depends on its course: with two hosts, the endpoints' second deployments are
    // couples, which boot every run anyway. `scheduling.rs` drives one that must.)
    let fresh = all
        .iter()
        .filter(|t| t.fresh_deploy && t.state == "done" && t.host.as_deref() == Some("h2"));
    for t in fresh {
        let detail = workerlab::task(&lab, t.id).await;
        let first = detail
            .runs
            .iter()
            .min_by_key(|r| r.iteration)
            .expect("a done task has runs");
        assert_eq!(
            first.environment.runs_since_deploy,
            Some(0),
            "{:#?}",
            detail.runs
        );
        assert_ne!(
            first.environment.boot_method.as_deref(),
            Some("none (already running)"),
            "{:#?}",
            detail.runs
        );
    }
    let on_h1: Vec<_> = all
        .iter()
        .filter(|t| t.host.as_deref() == Some("h1"))
        .collect();
    assert_eq!(on_h1.len(), 1, "only h1's first task: {all:#?}");
    assert_eq!(on_h1[0].state, "done");
    assert!(
        all.iter()
            .filter(|t| t.state == "done")
            .all(|t| t.host.is_some()),
        "{all:#?}"
    );
    assert!(host(&lab, "h1").await.unwrap()["state"] == "quarantined");

    // Released, h1 is available again with its streak cleared (its worker said it is off).
    let (status, body) = host_action(&lab, id1, "release", &operator).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "powered_off", "{body}");
    assert_eq!(body["available"], true, "{body}");
    assert_eq!(body["failure_streak"], 0, "{body}");
    let h2 = host(&lab, "h2").await.unwrap();
    assert_eq!(h2["current_kernel"], running_release().as_str(), "{h2}");
    assert_eq!(
        h2["last_power_action"],
        Value::Null,
        "h2 never needed one: {h2}"
    );
}

/// The VM bisect's build: Debian's kernel image (the same for every commit: see the test's
/// doc) and an initramfs piece holding the commit's benchmark and its level.
const VM_BUILD_SH: &str = r#"set -e
rm -rf root && mkdir -p root
cp bench.sh bench.conf root/
(cd root && find . | cpio -o -H newc --quiet) > bench.cpio
cp "$PERFBISECT_TEST_VMLINUZ" vmlinuz
"#;

/// Four seconds of "work" (the window in which the test hangs a host), then a score with a
/// little noise from the host's own entropy.
const VM_BENCH_SH: &str = r#". /bench.conf
sleep 4
n=$(od -An -N1 -tu1 /dev/urandom)
echo "score: $((LEVEL * 1000 + n * 4))"
"#;

const VM_JOB: &str = "\
testcase: labbench
tbox_group: vmlab
rootfs: lab.cpio.gz
build: {command: sh build.sh}
deploy: {kind: ssh, kernel: vmlinuz, initrd: [bench.cpio]}
run: {command: sh /bench.sh, format: key_value}
runs_per_task: 2
timeouts: {build_secs: 120, boot_secs: 100, run_secs: 40}
";

/// A host in the middle of a run hangs (its CPUs stopped through QMP): the run times out,
/// the worker power-cycles the host through the BMC, and the task goes on. Returns the task
/// that hung.
async fn hang_and_power_cycle(
    lab: &Lab,
    vm: &workerlab::lab::LabHost,
    name: &str,
    running: &Value,
    started: std::time::Instant,
) -> i64 {
    let qmp = perfbisect_worker::power::Qmp {
        socket: vm.qmp_socket(),
    };
    qmp.execute("stop").await.unwrap();
    let hung_task = running["current_task"].as_i64().unwrap();
    println!(
        "{name} hung during task {hung_task} at {:?}",
        started.elapsed()
    );
    let cycled = host_until(
        lab,
        name,
        "the hung host power-cycled",
        Duration::from_secs(600),
        |h| h["last_power_action"] == "cycle (ipmi)",
        |_| (),
    )
    .await;
    assert_eq!(cycled["failure_streak"], 0, "it came back: {cycled}");
    assert_eq!(
        vm.power_log(),
        ["power 1", "power 0", "power 1"],
        "ipmitool's cycle reached the chassis"
    );
    println!("{name} power-cycled at {:?}", started.elapsed());
    hung_task
}

/// Waits up to `limit_secs` for the bisect to end `found` at `culprit` with no failed task
/// (the hosts' logs in the message when not); its tasks.
async fn found(
    lab: &Lab,
    bisect: i64,
    culprit: &str,
    hosts: [&str; 2],
    limit_secs: u64,
    started: std::time::Instant,
) -> Vec<perfbisect_wire::tasks::TaskSummary> {
    let done = watch(&lab.api, bisect, Duration::from_secs(limit_secs))
        .await
        .unwrap();
    println!(
        "bisect {} at {:?}, {} runs",
        done.status,
        started.elapsed(),
        done.runs_done
    );
    assert_eq!(
        done.status,
        "found",
        "{done:#?}\n{}\n{}",
        lab.log(hosts[0]),
        lab.log(hosts[1])
    );
    assert_eq!(done.culprit.as_ref().unwrap().commit.sha, culprit);
    let all = workerlab::tasks(lab, bisect).await;
    assert!(all.iter().all(|t| t.state != "failed"), "{all:#?}");
    all
}

/// A host dies for good: powered off through its BMC, and its power switch no longer starts
/// it. Its worker fails three times and the server quarantines it.
async fn kill_until_quarantined(
    lab: &Lab,
    vm: &workerlab::lab::LabHost,
    name: &str,
    limit: Duration,
    started: std::time::Instant,
) {
    std::fs::write(vm.path().join("start.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let off = vm.ipmitool(&["chassis", "power", "off"]);
    assert!(off.status.success(), "{off:?}");
    let quarantined = host_until(
        lab,
        name,
        "the dead host quarantined",
        limit,
        |h| h["state"] == "quarantined",
        |_| (),
    )
    .await;
    assert_eq!(quarantined["failure_streak"], 3, "{quarantined}");
    println!("{name} quarantined at {:?}", started.elapsed());
}

/// A worker's flags for a VM lab host: ssh with the host's key, kexec (the default), IPMI.
fn vm_host_args(host: &workerlab::lab::LabHost) -> Vec<String> {
    let d = host.path().display().to_string();
    vec![
        "--ssh-target".into(),
        "root@127.0.0.1".into(),
        "--ssh-port".into(),
        host.ssh_port.to_string(),
        "--ssh-identity".into(),
        format!("{d}/client_key"),
        "--ssh-option=StrictHostKeyChecking=no".into(),
        "--ssh-option=UserKnownHostsFile=/dev/null".into(),
        "--ssh-option=LogLevel=ERROR".into(),
        "--rootfs-dir".into(),
        host.rootfs_dir.display().to_string(),
        "--power-driver".into(),
        "ipmi".into(),
        "--bmc-host".into(),
        "127.0.0.1".into(),
        "--bmc-port".into(),
        host.bmc_port.to_string(),
        "--bmc-user".into(),
        "admin".into(),
        "--bmc-password-file".into(),
        format!("{d}/bmc-password"),
        "--bmc-cipher-suite".into(),
        "3".into(),
        "--host-down-pause-secs".into(),
        "5".into(),
        "--claim-wait-secs".into(),
        "2".into(),
    ]
}

/// What is real here: the server, PostgreSQL, the two worker processes, the git repository
/// and its builds, two qemu machines standing in for bare-metal hosts (sshd, kexec-tools),
/// the kexec into each commit's kernel, the release and version check, `ipmi_sim` and
/// `ipmitool -I lanplus`. What stands in: every commit's "kernel" is Debian's prebuilt image;
/// the planted change is in the benchmark the commit's initramfs piece carries, and the
/// commit's identity is checked by booting it, not by its release. The quick variant of
/// `a_kernel_built_from_source_is_bisected_on_two_vm_hosts_through_a_hang_and_a_dead_host`,
/// which builds each commit's kernel (two clean kernel builds, one per worker, take most
/// of its time).
#[tokio::test]
#[ignore = "two VMs under TCG and a bisect through them (about 10 minutes): cargo nextest run -p perfbisect-cli --test lab_hosts --run-ignored only a_kernel_bisect_on_two_vm_hosts"]
async fn a_kernel_bisect_on_two_vm_hosts_survives_a_hang_and_a_dead_host() {
    let vmlinuz = workerlab::debian_kernel();
    let release = perfbisect_worker::initramfs::image_release(&vmlinuz).unwrap();
    let lab = Lab::new().await;
    let _server = lab.server(60).await;
    let vms = [
        workerlab::lab::LabHost::start(),
        workerlab::lab::LabHost::start(),
    ];
    for vm in &vms {
        vm.wait_up(Duration::from_secs(300));
    }
    let conf = |level: u32| Some(format!("LEVEL={level}\n"));
    let mut history: Vec<Vec<(&str, Option<String>)>> = vec![vec![
        ("build.sh", Some(VM_BUILD_SH.into())),
        ("bench.sh", Some(VM_BENCH_SH.into())),
        ("bench.conf", conf(100)),
    ]];
    for i in 1..6 {
        history.push(match i {
            3 => vec![("bench.conf", conf(130))],
            _ => vec![("notes", Some(format!("{i}\n")))],
        });
    }
    let repo = lab.path().join("labbench.git");
    let shas = linear_repo(&repo, &history);
    lab.api
        .add_repository("labbench", &repo.display().to_string())
        .await
        .unwrap();
    let vm = vmlinuz.display().to_string();
    let names = ["vm-a", "vm-b"];
    let args: Vec<Vec<String>> = vms.iter().map(vm_host_args).collect();
    let _workers: Vec<_> = names
        .iter()
        .zip(&args)
        .map(|(name, a)| {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            worker(&lab, name, "vmlab", &a, &[("PERFBISECT_TEST_VMLINUZ", &vm)])
        })
        .collect();
    let started = std::time::Instant::now();
    let bisect = submit(
        &lab,
        "labbench",
        &shas[0],
        &shas[5],
        VM_JOB,
        "labbench.score",
    )
    .await;

    // A host in the middle of a run hangs (its CPUs stopped through QMP): the run times out,
    // the worker power-cycles the host through the BMC, and the task goes on.
    let running = eventually("a host running a job", Duration::from_secs(600), || async {
        inventory(&lab)
            .await
            .into_iter()
            .find(|h| h["state"] == "running")
    })
    .await;
    let x = names.iter().position(|n| running["name"] == *n).unwrap();
    let y = 1 - x;
    let hung_task = hang_and_power_cycle(&lab, &vms[x], names[x], &running, started).await;

    kill_until_quarantined(&lab, &vms[y], names[y], Duration::from_secs(900), started).await;

    // The hung host finishes the bisect.
    let all = found(
        &lab,
        bisect.id,
        &shas[3],
        [names[x], names[y]],
        1800,
        started,
    )
    .await;

    // The hung run is stored as incomplete with the power cycle in its log; the same task
    // then booted the commit again and its later runs completed.
    let detail = workerlab::task(&lab, hung_task).await;
    let hung = detail
        .runs
        .iter()
        .find(|r| !r.completed)
        .unwrap_or_else(|| panic!("no lost run in {detail:#?}"));
    assert!(
        hung.log.contains("power-cycling") && hung.log.contains("through ipmi"),
        "{}",
        hung.log
    );
    assert_eq!(hung.host, names[x]);
    assert!(
        detail
            .runs
            .iter()
            .any(|r| r.completed && r.started_at > hung.finished_at),
        "{detail:#?}"
    );
    // Every completed run ran on a lab host, in the kernel the worker kexec'd into.
    for t in all.iter().filter(|t| t.state == "done") {
        for run in workerlab::task(&lab, t.id).await.runs {
            if !run.completed {
                continue;
            }
            let env = &run.environment;
            assert_eq!(
                env.kernel_release.as_deref(),
                Some(release.as_str()),
                "{env:?}"
            );
            assert_eq!(env.host.as_deref(), Some("lab-host"), "{env:?}");
            let method = env.boot_method.as_deref().unwrap_or_default();
            assert!(method == "kexec" || method.starts_with("none"), "{env:?}");
        }
    }
    let y_inv = host(&lab, names[y]).await.unwrap();
    assert_eq!(y_inv["state"], "quarantined", "{y_inv}");
    let x_inv = host(&lab, names[x]).await.unwrap();
    assert_eq!(x_inv["current_kernel"], release.as_str(), "{x_inv}");
}

/// The real kernel bisect's benchmark, built static into the lab hosts' root filesystem:
/// `getppid` in batches of 1000 for `$1` seconds; the fastest batch's time per call (the
/// fastest, so a host slowed by other work on the machine running the VMs does not move it).
const GETPPID_BENCH_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 3, best = 1e9, start = now();
    long calls = 0;
    while (now() - start < secs) {
        double t0 = now();
        for (int i = 0; i < 1000; i++)
            syscall(SYS_getppid);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
        calls += 1000;
    }
    printf("ns_per_call: %.1f\ncalls: %ld\n", best / 1000 * 1e9, calls);
    return 0;
}
"#;

/// The benchmark, compiled static (the lab's root filesystem has no C library of its own
/// for it).
fn getppid_bench(dir: &std::path::Path) -> Vec<u8> {
    let src = dir.join("getppid-bench.c");
    let bin = dir.join("getppid-bench");
    std::fs::write(&src, GETPPID_BENCH_C).unwrap();
    let out = std::process::Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(bin).unwrap()
}

/// What the lab's kernels need on top of `make tinyconfig`: the console, an initramfs
/// (the lab's gzip-compressed rootfs), ELF and scripts, proc (the boot id, `/proc/iomem`
/// for kexec), sysfs, devtmpfs, users and ptys for sshd, futexes and epoll for glibc's
/// dropbear and kexec, the network (unix and inet sockets, PCI and the built-in e1000 that
/// qemu's user-mode network gives the VM), ACPI, and kexec (each commit's kernel kexecs
/// the next).
const LAB_KERNEL_CONFIG: &[&str] = &[
    "CONFIG_64BIT=y",
    "CONFIG_BLK_DEV_INITRD=y",
    "CONFIG_RD_GZIP=y",
    "CONFIG_TTY=y",
    "CONFIG_SERIAL_8250=y",
    "CONFIG_SERIAL_8250_CONSOLE=y",
    "CONFIG_PRINTK=y",
    "CONFIG_BINFMT_ELF=y",
    "CONFIG_BINFMT_SCRIPT=y",
    "CONFIG_PROC_FS=y",
    "CONFIG_PROC_SYSCTL=y",
    "CONFIG_SYSFS=y",
    "CONFIG_DEVTMPFS=y",
    "CONFIG_MULTIUSER=y",
    "CONFIG_UNIX98_PTYS=y",
    "CONFIG_FUTEX=y",
    "CONFIG_EPOLL=y",
    "CONFIG_POSIX_TIMERS=y",
    "CONFIG_FILE_LOCKING=y",
    "CONFIG_SHMEM=y",
    "CONFIG_TMPFS=y",
    "CONFIG_PCI=y",
    "CONFIG_ACPI=y",
    "CONFIG_NET=y",
    "CONFIG_UNIX=y",
    "CONFIG_INET=y",
    "CONFIG_NETDEVICES=y",
    "CONFIG_ETHERNET=y",
    "CONFIG_NET_VENDOR_INTEL=y",
    "CONFIG_E1000=y",
    "CONFIG_KEXEC=y",
    "CONFIG_RELOCATABLE=y",
];

fn kernel_job() -> String {
    let mut job = String::from(
        "testcase: getppid\ntbox_group: vmlab\nkconfig: lab-tinyconfig-x86_64\n\
         rootfs: lab.cpio.gz\nbuild:\n  kind: kernel\n  config:\n",
    );
    for line in LAB_KERNEL_CONFIG {
        job.push_str(&format!("    - {line}\n"));
    }
    job.push_str(
        "deploy: {kind: ssh}\n\
         run: {command: /bin/getppid-bench 3, format: key_value}\n\
         runs_per_task: 2\n\
         timeouts: {build_secs: 3600, boot_secs: 120, run_secs: 40}\n",
    );
    job
}

/// The history on top of the imported tree: comments in files the tiny kernel compiles
/// (each one a small rebuild), and at commit 4 of 7 a 10 µs busy delay in `getppid`.
fn kernel_history() -> Vec<workerlab::linux::Change> {
    use workerlab::linux::{Change, original};
    let mut files: std::collections::BTreeMap<&str, String> = Default::default();
    let mut history = Vec::new();
    let mut change = |subject: &str, path: &'static str, edit: &dyn Fn(&str) -> String| {
        let before = files.entry(path).or_insert_with(|| original(path)).clone();
        let after = edit(&before);
        assert_ne!(before, after, "{subject}: the edit changed nothing");
        files.insert(path, after.clone());
        history.push(Change {
            subject: subject.into(),
            files: vec![(path.into(), after)],
        });
    };
    let comment =
        |text: &'static str| move |s: &str| format!("{s}\n/* perfbisect lab: {text} */\n");
    change("mm: a note", "mm/mmap.c", &comment("mmap"));
    change("kernel/sys: a note", "kernel/sys.c", &comment("sys"));
    change("fs: a note", "fs/read_write.c", &comment("read_write"));
    change("getppid: wait 10 us first", "kernel/sys.c", &|s: &str| {
        s.replacen(
            "#include <linux/export.h>\n",
            "#include <linux/export.h>\n#include <linux/delay.h>\n",
            1,
        )
        .replacen(
            "SYSCALL_DEFINE0(getppid)\n{\n\tint pid;\n\n",
            "SYSCALL_DEFINE0(getppid)\n{\n\tint pid;\n\n\tudelay(10);\n",
            1,
        )
    });
    change("init: a note", "init/main.c", &comment("main"));
    change("lib: a note", "lib/string.c", &comment("string"));
    change(
        "kernel/sys: another note",
        "kernel/sys.c",
        &comment("sys again"),
    );
    history
}

/// The real thing: a bisect through the API of a kernel built from source for each commit
/// (Debian's linux-source-6.1 in git, tinyconfig plus what the lab needs, through the
/// worker's kernel recipe), on two qemu machines standing in for bare-metal hosts (sshd,
/// kexec-tools, `ipmi_sim` behind `ipmitool -I lanplus`). Each run kexecs the host into
/// the commit's kernel, which carries its commit in its release, and runs a static
/// benchmark of `getppid`; one commit of seven makes that syscall slower. One host hangs
/// mid-run and is power-cycled through its BMC; the other dies and is quarantined.
#[tokio::test]
#[ignore = "builds a kernel per commit and bisects it on two VMs under TCG (about 40 minutes): apt-get install -y linux-source-6.1 flex bison bc libelf-dev && cargo nextest run -p perfbisect-cli --test lab_hosts --run-ignored only a_kernel_built_from_source"]
async fn a_kernel_built_from_source_is_bisected_on_two_vm_hosts_through_a_hang_and_a_dead_host() {
    let started = std::time::Instant::now();
    let lab = Lab::new().await;
    let repo = lab.path().join("linux.git");
    let shas = workerlab::linux::linux_repo(&repo, &kernel_history());
    assert_eq!(shas.len(), 8);
    let planted = &shas[4];
    let base_release = workerlab::linux::base_release();
    let release_of = |sha: &str| {
        format!(
            "{base_release}{}",
            perfbisect_worker::build::kernel::localversion(sha)
        )
    };
    println!("repository ready at {:?}", started.elapsed());
    let _server = lab.server(60).await;
    let put = reqwest::Client::new()
        .put(format!(
            "{}/api/v1/kconfigs/lab-tinyconfig-x86_64",
            lab.api.base()
        ))
        .bearer_auth(common::API_TOKEN)
        .body(workerlab::linux::tinyconfig())
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{put:?}");
    lab.api
        .add_repository("linux", &repo.display().to_string())
        .await
        .unwrap();

    let bench = getppid_bench(lab.path());
    let extra = [("bin/getppid-bench".to_string(), 0o755, bench)];
    let vms = [
        workerlab::lab::LabHost::start_with(&extra),
        workerlab::lab::LabHost::start_with(&extra),
    ];
    for vm in &vms {
        vm.wait_up(Duration::from_secs(300));
    }
    // The benchmark runs on the hosts' own (Debian's) kernel.
    let own = vms[0].ssh("/bin/getppid-bench 1").unwrap_or_default();
    assert!(own.starts_with("ns_per_call: "), "{own}");
    println!(
        "hosts up at {:?}; Debian's kernel: {}",
        started.elapsed(),
        own.trim()
    );

    let names = ["vm-a", "vm-b"];
    let args: Vec<Vec<String>> = vms.iter().map(vm_host_args).collect();
    let _workers: Vec<_> = names
        .iter()
        .zip(&args)
        .map(|(name, a)| {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            worker(&lab, name, "vmlab", &a, &[])
        })
        .collect();
    let bisect = submit(
        &lab,
        "linux",
        &shas[0],
        &shas[7],
        &kernel_job(),
        "getppid.ns_per_call",
    )
    .await;

    // A host in the middle of a run, in a kernel it built and kexec'd into, hangs (its CPUs
    // stopped through QMP): the run times out, the worker power-cycles the host through the
    // BMC (it comes back on its own kernel), and the task goes on.
    let running = eventually(
        "a host running a job",
        Duration::from_secs(3600),
        || async {
            inventory(&lab)
                .await
                .into_iter()
                .find(|h| h["state"] == "running")
        },
    )
    .await;
    let x = names.iter().position(|n| running["name"] == *n).unwrap();
    let y = 1 - x;
    let kernel = running["current_kernel"].as_str().unwrap_or_default();
    assert!(
        shas.iter().any(|s| kernel == release_of(s)),
        "{running}: not one of the commits' kernels"
    );
    println!("{} runs {kernel}", names[x]);
    let hung_task = hang_and_power_cycle(&lab, &vms[x], names[x], &running, started).await;

    kill_until_quarantined(&lab, &vms[y], names[y], Duration::from_secs(1800), started).await;

    // The hung host finishes the bisect, and names the planted commit.
    let all = found(
        &lab,
        bisect.id,
        planted,
        [names[x], names[y]],
        3600,
        started,
    )
    .await;

    // Every kernel was built from its commit: the first build on each host from scratch,
    // the later ones incremental in the host's object tree, and faster.
    let mut details = Vec::new();
    for t in &all {
        details.push(workerlab::task(&lab, t.id).await);
    }
    let mut builds: Vec<&perfbisect_wire::tasks::TaskBuild> =
        details.iter().flat_map(|d| &d.builds).collect();
    builds.sort_by_key(|b| b.reported_at);
    assert!(builds.iter().all(|b| b.succeeded), "{builds:#?}");
    let mut kernels_built = 0;
    for name in names {
        let on: Vec<_> = builds
            .iter()
            .filter(|b| b.host == name && !b.cached)
            .collect();
        let Some((first, later)) = on.split_first() else {
            continue;
        };
        kernels_built += on.len();
        println!(
            "{name}: {} kernels built, the first in {:.0} s, then {:?} s",
            on.len(),
            first.duration_secs,
            later
                .iter()
                .map(|b| b.duration_secs.round() as i64)
                .collect::<Vec<_>>()
        );
        for b in later {
            assert!(
                b.duration_secs < first.duration_secs,
                "an incremental build ({:.0} s of {}) took longer than the clean one ({:.0} s)",
                b.duration_secs,
                b.sha,
                first.duration_secs
            );
        }
    }
    assert!(kernels_built >= 3, "{builds:#?}");

    // How every run ended. The runs that did not complete are the one the hang cut off
    // (its log says the host was power-cycled) and those of the host that died; every other
    // run completed in its commit's kernel, kexec'd on a lab host.
    let runs: Vec<&perfbisect_wire::tasks::TaskRun> =
        details.iter().flat_map(|d| &d.runs).collect();
    let hung_detail = details.iter().find(|d| d.task.id == hung_task).unwrap();
    let hung = hung_detail
        .runs
        .iter()
        .find(|r| !r.completed && r.host == names[x])
        .unwrap_or_else(|| panic!("no lost run in {hung_detail:#?}"));
    assert!(
        hung.log.contains("power-cycling") && hung.log.contains("through ipmi"),
        "{}",
        hung.log
    );
    assert!(
        hung_detail
            .runs
            .iter()
            .any(|r| r.completed && r.started_at > hung.finished_at),
        "the hung task booted its commit again and ran: {hung_detail:#?}"
    );
    for run in &runs {
        if !run.completed {
            assert!(
                run.host == names[y] || std::ptr::eq(*run, hung),
                "a run that did not complete on the live host: {run:#?}"
            );
            continue;
        }
        let env = &run.environment;
        assert_eq!(
            env.kernel_release.as_deref(),
            Some(release_of(&run.sha).as_str()),
            "the run of {} ran in another kernel: {env:?}",
            run.sha
        );
        assert!(env.kernel_version.is_some(), "{env:?}");
        assert_eq!(env.host.as_deref(), Some("lab-host"), "{env:?}");
        let method = env.boot_method.as_deref().unwrap_or_default();
        assert!(method == "kexec" || method.starts_with("none"), "{env:?}");
        let machine = env.machine.as_ref().expect("the VM's machine");
        assert_eq!(machine.threads, Some(1), "{env:?}");
        assert!(run.metrics.contains_key("getppid.ns_per_call"), "{run:#?}");
    }
    let completed = runs.iter().filter(|r| r.completed).count();
    // The planted commit's runs and its parent's, as measured.
    let level = |sha: &str| {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.completed && r.sha == sha)
            .map(|r| r.metrics["getppid.ns_per_call"])
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    println!(
        "{} runs ({completed} completed), {kernels_built} kernels built; getppid {:.0} ns before, {:.0} ns from the planted commit; {:?} in all",
        runs.len(),
        level(&shas[3]),
        level(planted),
        started.elapsed()
    );
    assert!(level(planted) > level(&shas[3]) + 5000.0);
    let y_inv = host(&lab, names[y]).await.unwrap();
    assert_eq!(y_inv["state"], "quarantined", "{y_inv}");
    let x_inv = host(&lab, names[x]).await.unwrap();
    let last = x_inv["current_kernel"].as_str().unwrap_or_default();
    assert!(
        shas.iter().any(|s| last == release_of(s)),
        "{x_inv}: not one of the commits' kernels"
    );
}
