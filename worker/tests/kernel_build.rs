//! The kernel recipe on a real kernel tree: Debian's `linux-source-6.1` with a tiny config
//! (the stored kconfig is `make tinyconfig`'s output; the job pins what booting under qemu
//! needs), `make olddefconfig`, bzImage; then the built kernel is booted under qemu with a
//! busybox initramfs and runs a benchmark. An incremental rebuild after a one-line config
//! change reuses the object tree.
//!
//! Opt-in (about 2 minutes on 2 cores, plus 1 minute to unpack the tree once):
//!
//! ```sh
//! apt-get install -y linux-source-6.1 flex bison bc libelf-dev qemu-system-x86 busybox-static
//! cargo nextest run -p perfbisect-worker --test kernel_build --run-ignored only
//! ```

mod common;

use common::linux::linux_tree;
use perfbisect_worker::build::kernel;
use perfbisect_worker::config::QemuConfig;
use perfbisect_worker::deploy::{RunEnd, RunRequest, VmEnd, qemu};
use std::path::Path;
use tokio::sync::watch;

const JOB: &str = "\
testcase: tiny
tbox_group: vm
kconfig: tinyconfig-x86_64
build:
  kind: kernel
  config:
    - CONFIG_64BIT=y
    - CONFIG_BLK_DEV_INITRD=y
    - CONFIG_TTY=y
    - CONFIG_SERIAL_8250=y
    - CONFIG_SERIAL_8250_CONSOLE=y
    - CONFIG_PRINTK=y
    - CONFIG_BINFMT_ELF=y
    - CONFIG_BINFMT_SCRIPT=y
    - CONFIG_PROC_FS=y
    - CONFIG_SYSFS=y
    - CONFIG_DEVTMPFS=y
    - CONFIG_PCI=y
    - CONFIG_ACPI=y
    - CONFIG_DEVPORT=y
deploy: {kind: qemu, initrd: [rootfs.cpio], memory_mb: 256}
run: {command: 'echo \"answer: 42\"', format: key_value}
timeouts: {build_secs: 3600, boot_secs: 300, run_secs: 120}
";

async fn build(job: &perfbisect_wire::JobSpec, kconfig: &str, src: &Path, obj: &Path, out: &Path) {
    let (_tx, mut cancel) = watch::channel(false);
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let output = kernel::build_tree(
        job,
        "0123456789abcdef",
        kconfig,
        src,
        obj,
        out,
        jobs,
        None,
        &[],
        &mut cancel,
    )
    .await
    .unwrap();
    assert!(
        output.success(),
        "{}",
        perfbisect_worker::exec::tail(&output.log(), 60)
    );
}

#[tokio::test]
#[ignore = "builds a real kernel (minutes): cargo nextest run -p perfbisect-worker --test kernel_build --run-ignored only"]
async fn the_kernel_recipe_builds_a_real_tree_that_boots_and_runs_the_job() {
    let src = linux_tree();
    let tmp = tempfile::tempdir().unwrap();
    // The stored kconfig: what `make tinyconfig` gives.
    let kconfig = common::linux::tinyconfig();
    let job = common::job(JOB);
    let obj = tmp.path().join("obj");
    let out = tmp.path().join("out");
    build(&job, &kconfig, &src, &obj, &out).await;
    let release = std::fs::read_to_string(out.join("kernel.release")).unwrap();
    assert!(release.starts_with("6.1"), "{release}");
    // The release carries the commit.
    assert!(release.trim().ends_with("-pb0123456789ab"), "{release}");
    let config = std::fs::read_to_string(out.join("config")).unwrap();
    // The job's pinned options survived olddefconfig.
    assert!(
        config.contains("CONFIG_SERIAL_8250_CONSOLE=y"),
        "pinned options lost"
    );
    assert_eq!(
        perfbisect_worker::initramfs::image_release(&out.join("vmlinuz")).as_deref(),
        Some(release.trim())
    );

    // Boot it with a busybox initramfs; the job runs in the VM.
    std::fs::write(out.join("rootfs.cpio"), common::busybox_rootfs()).unwrap();
    let req = RunRequest {
        job: &job,
        sha: "tiny",
        artifacts: &out,
        env: vec![],
    };
    let (_tx, mut cancel) = watch::channel(false);
    let qemu_config = QemuConfig {
        binary: "qemu-system-x86_64".into(),
        accel: "tcg".into(),
    };
    let run = qemu::run(
        &req,
        &qemu_config,
        None,
        &tmp.path().join("scratch"),
        &mut cancel,
    )
    .await
    .unwrap();
    let RunEnd::Ran { results, .. } = &run.end else {
        panic!("{:?}\n{}", run.end, run.log)
    };
    assert_eq!(results.as_deref(), Some("answer: 42\n"), "{}", run.log);
    // The VM was stopped when its results arrived: a tiny config without ACPI only halts.
    assert_eq!(run.vm_end, Some(VmEnd::ResultsMarker), "{}", run.log);
    assert_eq!(
        run.environment.kernel_version,
        perfbisect_worker::initramfs::image_version(&out.join("vmlinuz"))
    );
    assert_eq!(
        run.environment.kernel_release.as_deref(),
        Some(release.trim())
    );

    // Another pinned option: olddefconfig again, an incremental build in the same object
    // tree, and a release that says so.
    let mut changed = job.clone();
    changed
        .build
        .config
        .push("CONFIG_LOCALVERSION=\"-pb\"".into());
    let out2 = tmp.path().join("out2");
    build(&changed, &kconfig, &src, &obj, &out2).await;
    let release2 = std::fs::read_to_string(out2.join("kernel.release")).unwrap();
    assert_eq!(
        release2.trim(),
        release
            .trim()
            .replace("-pb0123456789ab", "-pb-pb0123456789ab")
    );
}
