//! Fixtures for the runner tests: a prebuilt Debian kernel (fetched once by
//! scripts/test-kernel.sh into the target directory) and a busybox initramfs.
#![allow(dead_code)] // each test file uses a different part

use perfbisect_wire::JobSpec;
use perfbisect_worker::initramfs::CpioWriter;
use std::path::{Path, PathBuf};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// Debian's prebuilt kernel image, cached under the target directory.
pub fn debian_kernel() -> PathBuf {
    let out = std::process::Command::new(repo_root().join("scripts/test-kernel.sh"))
        .arg(target_dir().join("test-kernel"))
        .output()
        .expect("running scripts/test-kernel.sh");
    assert!(
        out.status.success(),
        "fetching the test kernel: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A root filesystem of static busybox with every applet linked, as a cpio archive.
pub fn busybox_rootfs() -> Vec<u8> {
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.exists(),
        "/bin/busybox is missing: apt-get install busybox-static (scripts/test-packages)"
    );
    let list = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .unwrap();
    let mut w = CpioWriter::new(Vec::new());
    w.dir("bin").unwrap();
    w.file("bin/busybox", 0o755, &std::fs::read(busybox).unwrap())
        .unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" && !applet.is_empty() {
            w.symlink(&format!("bin/{applet}"), "busybox").unwrap();
        }
    }
    w.finish().unwrap()
}

/// A build directory holding `vmlinuz` and `rootfs.cpio`, as a command recipe would leave it.
pub fn vm_artifacts(dir: &Path) -> PathBuf {
    let artifacts = dir.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::copy(debian_kernel(), artifacts.join("vmlinuz")).unwrap();
    std::fs::write(artifacts.join("rootfs.cpio"), busybox_rootfs()).unwrap();
    artifacts
}

pub fn job(yaml: &str) -> JobSpec {
    JobSpec::from_yaml(yaml).unwrap()
}

/// The release in the Debian kernel's boot header.
pub fn debian_release() -> String {
    perfbisect_worker::initramfs::image_release(&debian_kernel()).expect("a bzImage header")
}
pub mod lab;
pub mod linux;
pub mod sshd;
