//! A kernel bisect end to end through the `qemu` runner: real server and workers, a git
//! repository whose build recipe packs Debian's prebuilt kernel and a busybox initramfs with
//! a benchmark script; the planted commit changes the benchmark's parameter inside the
//! initramfs. Every run boots the kernel under software emulation, runs the benchmark as
//! the guest's job, and hands the results back over the second serial port.

mod common;
mod workerlab;

use common::Lab;
use perfbisect_cli::demo::watch;
use std::time::Duration;
use workerlab::{debian_kernel, linear_repo, lines, submit, task, tasks, worker};

const BUILD_SH: &str = r#"set -e
rm -rf root && mkdir -p root/bin
cp /bin/busybox root/bin/busybox
for a in $(root/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "root/bin/$a"; done
cp bench.sh bench.conf root/
(cd root && find . | cpio -o -H newc --quiet) > initrd.cpio
cp "$PERFBISECT_TEST_VMLINUZ" vmlinuz
if [ -e break-kernel ]; then head -c 4096 vmlinuz > v.tmp; mv v.tmp vmlinuz; fi
echo "$PERFBISECT_COMMIT" >> "$PERFBISECT_TEST_BUILDS"
"#;

/// A score with a little noise from the guest's own entropy.
const BENCH_SH: &str = r#". /bench.conf
n=$(od -An -N1 -tu1 /dev/urandom)
echo "score: $((LEVEL * 1000 + n * 4))"
echo "level: $LEVEL"
"#;

const JOB: &str = "\
testcase: vmbench
tbox_group: qemu
build: {command: sh build.sh}
deploy: {kind: qemu, kernel: vmlinuz, initrd: [initrd.cpio], memory_mb: 256}
run: {command: sh /bench.sh, format: key_value}
runs_per_task: 2
timeouts: {build_secs: 300, boot_secs: 300, run_secs: 300}
";

#[tokio::test]
async fn a_kernel_bisect_through_qemu_finds_the_planted_commit() {
    let vmlinuz = debian_kernel();
    let release = perfbisect_worker::initramfs::image_release(&vmlinuz).unwrap();
    let lab = Lab::new().await;
    let _server = lab.server(60).await;
    // c0 good, c2 does not boot (a truncated kernel), c4 planted (+30%), c7 bad.
    let conf = |level: u32| Some(format!("LEVEL={level}\n"));
    let mut history: Vec<Vec<(&str, Option<String>)>> = vec![vec![
        ("build.sh", Some(BUILD_SH.into())),
        ("bench.sh", Some(BENCH_SH.into())),
        ("bench.conf", conf(100)),
    ]];
    for i in 1..8 {
        history.push(match i {
            2 => vec![("break-kernel", Some("truncate vmlinuz\n".into()))],
            3 => vec![("break-kernel", None)],
            4 => vec![("bench.conf", conf(130))],
            _ => vec![("notes", Some(format!("{i}\n")))],
        });
    }
    let repo = lab.path().join("vmbench.git");
    let shas = linear_repo(&repo, &history);
    lab.api
        .add_repository("vmbench", &repo.display().to_string())
        .await
        .unwrap();
    let vm = vmlinuz.display().to_string();
    let builds = |w: &str| lab.path().join(format!("builds-{w}.txt"));
    let (b1, b2) = (
        builds("vm1").display().to_string(),
        builds("vm2").display().to_string(),
    );
    let _w1 = worker(
        &lab,
        "vm1",
        "qemu",
        &[],
        &[
            ("PERFBISECT_TEST_VMLINUZ", &vm),
            ("PERFBISECT_TEST_BUILDS", &b1),
        ],
    );
    let _w2 = worker(
        &lab,
        "vm2",
        "qemu",
        &[],
        &[
            ("PERFBISECT_TEST_VMLINUZ", &vm),
            ("PERFBISECT_TEST_BUILDS", &b2),
        ],
    );

    let bisect = submit(&lab, "vmbench", &shas[0], &shas[7], JOB, "vmbench.score").await;
    let done = watch(&lab.api, bisect.id, Duration::from_secs(900))
        .await
        .unwrap();
    assert_eq!(
        done.status,
        "found",
        "{:?}\n{}",
        done.status_reason,
        lab.log("vm1")
    );
    let culprit = done.culprit.as_ref().unwrap();
    assert_eq!(culprit.commit.sha, shas[4], "{done:#?}");
    assert!(culprit.confidence >= 0.99);
    let good = done
        .commits
        .iter()
        .find(|c| c.role == "good_endpoint")
        .unwrap();
    let bad = done
        .commits
        .iter()
        .find(|c| c.role == "bad_endpoint")
        .unwrap();
    assert!(
        bad.mean.unwrap() > good.mean.unwrap() * 1.2,
        "{good:?} {bad:?}"
    );
    if let Some(c2) = done.commits.iter().find(|c| c.sha == shas[2]) {
        assert_eq!(c2.verdict, "skipped", "{c2:?}");
    }
    println!("runs: {}", done.runs_done);
    // Every run booted Debian's kernel in qemu; the results and environment are stored.
    let all = tasks(&lab, bisect.id).await;
    let first = all.iter().find(|t| t.state == "done").unwrap();
    let detail = task(&lab, first.id).await;
    assert_eq!(detail.runs.len(), 2);
    for run in &detail.runs {
        assert!(run.completed, "{run:?}");
        assert_eq!(
            run.environment.kernel_release.as_deref(),
            Some(release.as_str())
        );
        assert_eq!(run.environment.boot_method.as_deref(), Some("qemu"));
        assert!(
            run.environment
                .kernel_cmdline
                .as_deref()
                .unwrap()
                .contains("console=ttyS0")
        );
        assert!(run.metrics.contains_key("vmbench.level"), "{run:?}");
    }
    // The build (or its cache hit) was reported with the build's output.
    assert!(!detail.builds.is_empty(), "{detail:?}");
    assert!(
        detail.builds.iter().all(|b| b.succeeded),
        "{:?}",
        detail.builds
    );
    // A worker never builds a commit twice.
    for file in [builds("vm1"), builds("vm2")] {
        let built = lines(&file);
        let mut unique = built.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(built.len(), unique.len(), "rebuilt: {built:?}");
    }

    // A range whose bad end does not boot cannot be bisected: it fails, saying why.
    let broken = submit(&lab, "vmbench", &shas[1], &shas[2], JOB, "vmbench.score").await;
    let failed = watch(&lab.api, broken.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(failed.status, "failed", "{failed:?}");
    let reason = failed.status_reason.unwrap();
    assert!(
        reason.contains("bad endpoint") && reason.contains("boot failed"),
        "{reason}"
    );
}
