//! The example job specs in `jobs/` are valid, and say what the README says they say.

use perfbisect_wire::{BuildKind, DeployKind, JobSpec};
use std::path::Path;

fn load(name: &str) -> JobSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../jobs")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    JobSpec::from_yaml(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_example_job_is_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../jobs");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") {
            load(&name);
            n += 1;
        }
    }
    assert!(n >= 5, "{n} example jobs");
}

#[test]
fn the_seed_reports_jobs_build_kernels_and_boot_them_on_bare_metal() {
    for (file, testcase, group) in [
        ("aim7-disk_wrt-ext4.yaml", "aim7", "lkp-ivb-ep01"),
        (
            "fxmark-dbench_client-directio.yaml",
            "fxmark",
            "lkp-icl-2sp8",
        ),
        (
            "fio-basic-4k-write-falloc.yaml",
            "fio-basic",
            "lkp-icl-2sp9",
        ),
    ] {
        let job = load(file);
        assert_eq!(job.testcase, testcase);
        assert_eq!(job.tbox_group, group);
        assert_eq!(job.build.kind, BuildKind::Kernel, "{file}");
        assert_eq!(job.deploy.kind, DeployKind::Ssh, "{file}");
        assert!(job.kconfig.is_some() && job.compiler.is_some() && job.rootfs.is_some());
    }
    let fio = load("fio-basic-4k-write-falloc.yaml");
    assert_eq!(fio.params["bs"], "4k");
    assert_eq!(fio.params["ioengine"], "falloc");
    assert_eq!(fio.run.format, "fio");
}

#[test]
fn the_userspace_job_runs_locally_and_counts_instructions() {
    let job = load("zstd-compress-perf-stat.yaml");
    assert_eq!(job.deploy.kind, DeployKind::Local);
    assert_eq!(job.build.kind, BuildKind::Command);
    assert_eq!(job.run.format, "perf_stat");
}
