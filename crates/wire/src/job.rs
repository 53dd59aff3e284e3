//! The job spec: what to build, how to deploy it, what to run, and how to read the result.
//!
//! Written in YAML close to LKP's `job.yaml`. Its canonical form (sorted-key JSON of the
//! parsed spec) and that form's SHA-256 identify "the same measurement" across bisects: two
//! specs that differ only in key order or YAML style hash the same.
//!
//! Compatibility: keys added after the first version (`build.kind`, `deploy`,
//! `timeouts.boot_secs`, the kernel and deploy options) are left out of the canonical form
//! while they hold their defaults, so a spec written before they existed keeps its hash (and
//! its cached builds) across upgrades.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// A parsed, validated job spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The benchmark program (`fio-basic`, `aim7`, ...); also the default metric prefix.
    pub testcase: String,
    /// The host group whose workers may run this job.
    pub tbox_group: String,
    /// Benchmark parameters, passed to the run command as `PERFBISECT_PARAM_<KEY>`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// Name of a kernel config stored on the server (`PUT /api/v1/kconfigs/{name}`); required
    /// by `build.kind: kernel`, which fetches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kconfig: Option<String>,
    /// The compiler the build uses (`gcc-12`, `clang-16`): `CC` for the build commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    /// The root filesystem image the benchmark runs in. For `deploy.kind: qemu`, a file of
    /// that name in the worker's `--rootfs-dir` (a cpio archive, possibly compressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    pub build: BuildRecipe,
    /// Where the build runs: this machine (default), a VM, or a bare-metal host over ssh.
    #[serde(default, skip_serializing_if = "Deploy::is_default")]
    pub deploy: Deploy,
    pub run: RunRecipe,
    /// Benchmark runs per task (one task = one commit on one host).
    #[serde(default = "default_runs_per_task")]
    pub runs_per_task: u32,
    #[serde(default)]
    pub timeouts: Timeouts,
}

/// How a commit is built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BuildKind {
    /// `build.command` in the checked-out tree; the tree is the artifact.
    #[default]
    Command,
    /// A Linux kernel: the job's `kconfig`, `make olddefconfig`, the image and modules with
    /// the job's compiler, packed for deployment.
    Kernel,
}

impl BuildKind {
    fn is_default(&self) -> bool {
        *self == BuildKind::Command
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildRecipe {
    #[serde(default, skip_serializing_if = "BuildKind::is_default")]
    pub kind: BuildKind,
    /// `kind: command`: shell command run in the checked-out tree; a non-zero exit makes the
    /// commit untestable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `kind: kernel`: the `ARCH` to build for (default `x86_64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// `kind: kernel`: the make target of the boot image (default `bzImage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `kind: kernel`: config lines applied on top of `kconfig` before `make olddefconfig`
    /// (`CONFIG_PREEMPT_NONE=y`, `# CONFIG_KASAN is not set`): options a benchmark pins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<String>,
}

impl BuildRecipe {
    /// A command recipe, as older specs wrote it (`build: {command: ...}`).
    pub fn command(command: &str) -> Self {
        Self {
            kind: BuildKind::Command,
            command: Some(command.to_string()),
            arch: None,
            image: None,
            config: Vec::new(),
        }
    }
}

/// Where and how the built commit is run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeployKind {
    /// On the worker's own machine, in the built tree (userspace projects).
    #[default]
    Local,
    /// Boot the built kernel in a qemu VM with an initramfs that runs the benchmark.
    Qemu,
    /// Copy the kernel to a bare-metal host, boot it once, run the benchmark over ssh.
    Ssh,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Deploy {
    #[serde(default)]
    pub kind: DeployKind,
    /// `qemu`/`ssh`: the kernel image, a path in the build (default for `build.kind:
    /// kernel`: `vmlinuz`; required otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `qemu`/`ssh`: initramfs pieces from the build, concatenated in this order (after the
    /// `rootfs` image, before the kernel's modules and the job itself).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub initrd: Vec<String>,
    /// `qemu`/`ssh`: extra kernel command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// `qemu`: memory of the VM in MiB (default 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u32>,
    /// `qemu`: virtual CPUs (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
}

impl Deploy {
    fn is_default(&self) -> bool {
        *self == Deploy::default()
    }

    /// The kernel image's path in the build.
    pub fn kernel_path<'a>(&'a self, build: &BuildRecipe) -> Option<&'a str> {
        match (&self.kernel, build.kind) {
            (Some(k), _) => Some(k),
            (None, BuildKind::Kernel) => Some(KERNEL_IMAGE),
            (None, BuildKind::Command) => None,
        }
    }
}

/// Where the kernel recipe leaves the boot image in its artifacts.
pub const KERNEL_IMAGE: &str = "vmlinuz";
/// Where the kernel recipe leaves the modules, as a cpio archive to append to an initramfs.
pub const KERNEL_MODULES: &str = "modules.cpio";
/// Where the kernel recipe leaves `make kernelrelease`.
pub const KERNEL_RELEASE: &str = "kernel.release";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRecipe {
    /// Shell command run once per run (in the built tree for `local`, in the booted system
    /// otherwise); its standard output holds the metrics.
    pub command: String,
    /// How to read the output: `auto`, `json`, `key_value`, `lkp_stats`, `fio`, `time_v`, `perf_stat`.
    #[serde(default = "default_format")]
    pub format: String,
    /// Read the metrics from this file (relative to the run's directory) instead of standard output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_file: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    #[serde(default = "default_build_secs")]
    pub build_secs: u64,
    /// From starting the boot (VM start, kexec or reboot) until the benchmark can start.
    #[serde(
        default = "default_boot_secs",
        skip_serializing_if = "is_default_boot_secs"
    )]
    pub boot_secs: u64,
    #[serde(default = "default_run_secs")]
    pub run_secs: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            build_secs: default_build_secs(),
            boot_secs: default_boot_secs(),
            run_secs: default_run_secs(),
        }
    }
}

fn default_runs_per_task() -> u32 {
    5
}
fn default_format() -> String {
    "auto".into()
}
fn default_build_secs() -> u64 {
    3600
}
fn default_boot_secs() -> u64 {
    600
}
fn is_default_boot_secs(s: &u64) -> bool {
    *s == default_boot_secs()
}
fn default_run_secs() -> u64 {
    3600
}

pub const FORMATS: &[&str] = &[
    "auto",
    "json",
    "key_value",
    "lkp_stats",
    "fio",
    "time_v",
    "perf_stat",
    "callgrind",
];

/// Why a job spec was refused. `key` names the offending key in dotted form.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobSpecError {
    #[error("job spec is not valid YAML for a job: {0}")]
    Syntax(String),
    #[error("job spec key `{key}`: {problem}")]
    Invalid { key: String, problem: String },
}

impl JobSpecError {
    /// The dotted key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            JobSpecError::Syntax(_) => None,
            JobSpecError::Invalid { key, .. } => Some(key),
        }
    }
}

/// Longest build or run command: it is one argument of `sh -c`, and the kernel refuses
/// arguments over 128 KiB (E2BIG) on every try.
pub const MAX_COMMAND_BYTES: usize = 64 << 10;

fn invalid(key: &str, problem: impl Into<String>) -> JobSpecError {
    JobSpecError::Invalid {
        key: key.to_string(),
        problem: problem.into(),
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
}

const NAME_RULE: &str = "must be 1-128 characters of letters, digits, '-', '_', '.', '+'";

/// A path inside the build: relative, without `..`, so a job cannot reach outside it.
fn is_build_path(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('/')
        && s.split('/').all(|part| part != ".." && !part.is_empty())
}

/// `CONFIG_FOO=value` or `# CONFIG_FOO is not set`.
fn is_config_line(s: &str) -> bool {
    let option = |name: &str| {
        name.strip_prefix("CONFIG_").is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
    };
    if let Some(name) = s
        .strip_prefix("# ")
        .and_then(|r| r.strip_suffix(" is not set"))
    {
        return option(name);
    }
    s.split_once('=')
        .is_some_and(|(name, value)| option(name) && !value.is_empty() && !value.contains('\n'))
}

impl JobSpec {
    /// Parses and validates YAML. Errors name the key and the problem.
    pub fn from_yaml(text: &str) -> Result<Self, JobSpecError> {
        let spec: JobSpec =
            yaml_serde::from_str(text).map_err(|e| JobSpecError::Syntax(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn validate(&self) -> Result<(), JobSpecError> {
        if let Some(path) = serde_json::to_value(self)
            .ok()
            .as_ref()
            .and_then(crate::text::find_nul)
        {
            return Err(invalid(&path, "contains a NUL character"));
        }
        for (key, command) in [
            ("build.command", self.build.command.as_deref()),
            ("run.command", Some(self.run.command.as_str())),
        ] {
            if command.is_some_and(|c| c.len() > MAX_COMMAND_BYTES) {
                return Err(invalid(
                    key,
                    format!(
                        "is longer than {MAX_COMMAND_BYTES} bytes (put a long script in the repository)"
                    ),
                ));
            }
        }
        if !is_name(&self.testcase) {
            return Err(invalid("testcase", NAME_RULE));
        }
        if !is_name(&self.tbox_group) {
            return Err(invalid("tbox_group", NAME_RULE));
        }
        for key in self.params.keys() {
            if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || key.is_empty() {
                return Err(invalid(
                    &format!("params.{key}"),
                    "parameter names are letters, digits and '_'",
                ));
            }
        }
        for (key, value) in [
            ("kconfig", &self.kconfig),
            ("compiler", &self.compiler),
            ("rootfs", &self.rootfs),
        ] {
            if value.as_deref().is_some_and(|v| !is_name(v)) {
                return Err(invalid(key, NAME_RULE));
            }
        }
        self.validate_build()?;
        self.validate_deploy()?;
        if self.run.command.trim().is_empty() {
            return Err(invalid("run.command", "must not be empty"));
        }
        if !FORMATS.contains(&self.run.format.as_str()) {
            return Err(invalid(
                "run.format",
                format!("`{}` is not one of {}", self.run.format, FORMATS.join(", ")),
            ));
        }
        if let Some(f) = &self.run.results_file
            && !is_build_path(f)
        {
            return Err(invalid(
                "run.results_file",
                "must be a relative path without `..`",
            ));
        }
        if !(1..=100).contains(&self.runs_per_task) {
            return Err(invalid("runs_per_task", "must be between 1 and 100"));
        }
        for (key, secs) in [
            ("timeouts.build_secs", self.timeouts.build_secs),
            ("timeouts.boot_secs", self.timeouts.boot_secs),
            ("timeouts.run_secs", self.timeouts.run_secs),
        ] {
            if secs == 0 {
                return Err(invalid(key, "must be positive"));
            }
        }
        Ok(())
    }

    fn validate_build(&self) -> Result<(), JobSpecError> {
        let b = &self.build;
        match b.kind {
            BuildKind::Command => {
                if b.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return Err(invalid("build.command", "must not be empty"));
                }
                for (key, set) in [
                    ("build.arch", b.arch.is_some()),
                    ("build.image", b.image.is_some()),
                    ("build.config", !b.config.is_empty()),
                ] {
                    if set {
                        return Err(invalid(key, "only for `build.kind: kernel`"));
                    }
                }
            }
            BuildKind::Kernel => {
                if b.command.is_some() {
                    return Err(invalid(
                        "build.command",
                        "the kernel recipe runs make itself; use `build.kind: command` for a custom build",
                    ));
                }
                if self.kconfig.is_none() {
                    return Err(invalid(
                        "kconfig",
                        "required by `build.kind: kernel`: the name of a config stored on the server",
                    ));
                }
                for (key, value) in [("build.arch", &b.arch), ("build.image", &b.image)] {
                    if value.as_deref().is_some_and(|v| !is_name(v)) {
                        return Err(invalid(key, NAME_RULE));
                    }
                }
                if let Some((i, line)) = b
                    .config
                    .iter()
                    .enumerate()
                    .find(|(_, l)| !is_config_line(l))
                {
                    return Err(invalid(
                        &format!("build.config[{i}]"),
                        format!(
                            "`{line}` is not `CONFIG_NAME=value` or `# CONFIG_NAME is not set`"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_deploy(&self) -> Result<(), JobSpecError> {
        let d = &self.deploy;
        match d.kind {
            DeployKind::Local => {
                for (key, set) in [
                    ("deploy.kernel", d.kernel.is_some()),
                    ("deploy.initrd", !d.initrd.is_empty()),
                    ("deploy.cmdline", d.cmdline.is_some()),
                    ("deploy.memory_mb", d.memory_mb.is_some()),
                    ("deploy.cpus", d.cpus.is_some()),
                ] {
                    if set {
                        return Err(invalid(key, "only for `deploy.kind: qemu` or `ssh`"));
                    }
                }
                if self.build.kind == BuildKind::Kernel {
                    return Err(invalid(
                        "deploy.kind",
                        "a kernel build must be booted: `qemu` or `ssh`",
                    ));
                }
            }
            DeployKind::Qemu | DeployKind::Ssh => {
                match d.kernel_path(&self.build) {
                    None => {
                        return Err(invalid(
                            "deploy.kernel",
                            "required unless `build.kind: kernel`: the kernel image's path in the build",
                        ));
                    }
                    Some(k) if !is_build_path(k) => {
                        return Err(invalid(
                            "deploy.kernel",
                            "must be a relative path without `..`",
                        ));
                    }
                    Some(_) => {}
                }
                if let Some(i) = d.initrd.iter().position(|p| !is_build_path(p)) {
                    return Err(invalid(
                        &format!("deploy.initrd[{i}]"),
                        "must be a relative path without `..`",
                    ));
                }
                if d.cmdline.as_deref().is_some_and(|c| c.contains('\n')) {
                    return Err(invalid("deploy.cmdline", "must be one line"));
                }
                if d.kind == DeployKind::Ssh {
                    for (key, set) in [
                        ("deploy.memory_mb", d.memory_mb.is_some()),
                        ("deploy.cpus", d.cpus.is_some()),
                    ] {
                        if set {
                            return Err(invalid(key, "only for `deploy.kind: qemu`"));
                        }
                    }
                }
                if d.memory_mb.is_some_and(|m| !(64..=1 << 20).contains(&m)) {
                    return Err(invalid(
                        "deploy.memory_mb",
                        "must be between 64 and 1048576",
                    ));
                }
                if d.cpus.is_some_and(|c| !(1..=1024).contains(&c)) {
                    return Err(invalid("deploy.cpus", "must be between 1 and 1024"));
                }
            }
        }
        Ok(())
    }

    /// The build command of a command recipe.
    pub fn build_command(&self) -> Option<&str> {
        self.build.command.as_deref()
    }

    /// Sorted-key JSON of the spec: the form that is hashed and stored.
    pub fn canonical_json(&self) -> String {
        // serde_json's Map is a BTreeMap (no `preserve_order`), so keys come out sorted.
        let value = serde_json::to_value(self).expect("a job spec always serializes");
        serde_json::to_string(&value).expect("a JSON value always serializes")
    }

    /// SHA-256 of the canonical form, hex.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.canonical_json().as_bytes()))
    }

    /// Hash of what decides the build artifact: build recipe, kconfig, compiler. Two jobs that
    /// differ only in what they run share their builds.
    pub fn build_hash(&self) -> String {
        let key = serde_json::json!({
            "build": self.build, "kconfig": self.kconfig, "compiler": self.compiler,
        });
        hex::encode(Sha256::digest(key.to_string().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "testcase: demo\ntbox_group: local\nparams:\n  size: 10\n  mode: fast\nbuild:\n  command: make\nrun:\n  command: ./bench\n";

    const KERNEL: &str = "testcase: fio-basic\ntbox_group: vm\nkconfig: x86_64-rhel-9.4\ncompiler: gcc-12\nbuild:\n  kind: kernel\n  config: ['CONFIG_PREEMPT_NONE=y', '# CONFIG_KASAN is not set']\ndeploy:\n  kind: qemu\nrun:\n  command: fio job.fio --output-format=json\n  format: fio\n";

    #[test]
    fn parses_with_defaults() {
        let spec = JobSpec::from_yaml(SPEC).unwrap();
        assert_eq!(spec.runs_per_task, 5);
        assert_eq!(spec.run.format, "auto");
        assert_eq!(spec.params["size"], serde_json::json!(10));
        assert_eq!(spec.build.kind, BuildKind::Command);
        assert_eq!(spec.deploy.kind, DeployKind::Local);
        assert_eq!(spec.timeouts.boot_secs, 600);
    }

    #[test]
    fn hash_ignores_key_order_and_style() {
        let a = JobSpec::from_yaml(SPEC).unwrap();
        let b = JobSpec::from_yaml(
            "run: {command: ./bench}\nbuild: {command: make}\nparams: {mode: fast, size: 10}\ntbox_group: local\ntestcase: demo\n",
        )
        .unwrap();
        assert_eq!(a.hash(), b.hash());
        let c = JobSpec::from_yaml(&SPEC.replace("size: 10", "size: 11")).unwrap();
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn specs_from_before_deploy_and_kinds_keep_their_hashes() {
        // The example job as the first version of the spec hashed it: stored bisects and
        // worker caches keyed by these hashes stay valid.
        let old = "testcase: demo\ntbox_group: local\nparams:\n  work: 200000\nbuild:\n  command: cc -O2 -o bench bench.c -lm\nrun:\n  command: ./bench\n  format: key_value\nruns_per_task: 5\ntimeouts:\n  build_secs: 120\n  run_secs: 60\n";
        let spec = JobSpec::from_yaml(old).unwrap();
        assert_eq!(
            spec.hash(),
            "024fb88b2d8454764032f54549ef58be9779b985d1dbc5b3670ae85a3a9ea3e3"
        );
        assert_eq!(
            spec.build_hash(),
            "8ac1fe4a5492d0b6f67475287b105c3ebee187d6e219bfb65d4ad5270f1df87d"
        );
        // Writing the defaults out is the same measurement.
        let explicit = old.replace(
            "build:\n  command",
            "deploy: {kind: local}\nbuild:\n  kind: command\n  command",
        );
        assert_eq!(JobSpec::from_yaml(&explicit).unwrap().hash(), spec.hash());
    }

    #[test]
    fn build_hash_ignores_what_is_run_but_not_how_it_is_built() {
        let a = JobSpec::from_yaml(KERNEL).unwrap();
        let b = JobSpec::from_yaml(&KERNEL.replace("job.fio", "other.fio")).unwrap();
        assert_ne!(a.hash(), b.hash());
        assert_eq!(a.build_hash(), b.build_hash());
        let c = JobSpec::from_yaml(&KERNEL.replace("gcc-12", "gcc-13")).unwrap();
        assert_ne!(a.build_hash(), c.build_hash());
        let d = JobSpec::from_yaml(&KERNEL.replace("PREEMPT_NONE", "PREEMPT")).unwrap();
        assert_ne!(a.build_hash(), d.build_hash());
    }

    #[test]
    fn kernel_job_parses() {
        let spec = JobSpec::from_yaml(KERNEL).unwrap();
        assert_eq!(spec.build.kind, BuildKind::Kernel);
        assert_eq!(spec.deploy.kind, DeployKind::Qemu);
        assert_eq!(spec.deploy.kernel_path(&spec.build), Some(KERNEL_IMAGE));
    }

    #[test]
    fn unknown_key_is_named() {
        let err = JobSpec::from_yaml(&format!("{SPEC}bogus: 1\n")).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        let err = JobSpec::from_yaml(&KERNEL.replace("kind: qemu", "kind: qemu\n  memory: 1"))
            .unwrap_err();
        assert!(err.to_string().contains("memory"), "{err}");
        let err = JobSpec::from_yaml(&KERNEL.replace("kind: qemu", "kind: vmware")).unwrap_err();
        assert!(err.to_string().contains("vmware"), "{err}");
    }

    #[test]
    fn missing_key_is_named() {
        let err = JobSpec::from_yaml("testcase: demo\ntbox_group: local\nbuild: {command: make}\n")
            .unwrap_err();
        assert!(err.to_string().contains("run"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let key = |yaml: &str| {
            JobSpec::from_yaml(yaml)
                .unwrap_err()
                .key()
                .map(String::from)
        };
        assert_eq!(
            key(&format!("{SPEC}runs_per_task: 0\n")).as_deref(),
            Some("runs_per_task")
        );
        assert_eq!(
            key(&SPEC.replace("testcase: demo", "testcase: 'a b'")).as_deref(),
            Some("testcase")
        );
        assert_eq!(
            key(&SPEC.replace("./bench", "./bench\n  format: xml")).as_deref(),
            Some("run.format")
        );
        assert_eq!(
            key(&SPEC.replace("command: make", "kind: command")).as_deref(),
            Some("build.command")
        );
        assert_eq!(
            key(&SPEC.replace("command: make", "command: make\n  arch: arm64")).as_deref(),
            Some("build.arch")
        );
        assert_eq!(
            key(&format!("{SPEC}timeouts: {{boot_secs: 0}}\n")).as_deref(),
            Some("timeouts.boot_secs")
        );
        assert_eq!(
            key(&format!("{SPEC}deploy: {{kind: qemu}}\n")).as_deref(),
            Some("deploy.kernel")
        );
        assert_eq!(
            key(&format!("{SPEC}deploy: {{kind: local, cpus: 2}}\n")).as_deref(),
            Some("deploy.cpus")
        );
        assert_eq!(
            key(&format!(
                "{SPEC}deploy: {{kind: qemu, kernel: ../vmlinuz}}\n"
            ))
            .as_deref(),
            Some("deploy.kernel")
        );
        assert_eq!(
            key(&format!(
                "{SPEC}deploy: {{kind: qemu, kernel: bzImage, initrd: [a, /etc/x]}}\n"
            ))
            .as_deref(),
            Some("deploy.initrd[1]")
        );
        assert_eq!(
            key(&format!(
                "{SPEC}deploy: {{kind: ssh, kernel: bzImage, memory_mb: 512}}\n"
            ))
            .as_deref(),
            Some("deploy.memory_mb")
        );
        assert_eq!(
            key(&KERNEL.replace("kconfig: x86_64-rhel-9.4\n", "")).as_deref(),
            Some("kconfig")
        );
        assert_eq!(
            key(&KERNEL.replace("kind: qemu", "kind: local")).as_deref(),
            Some("deploy.kind")
        );
        assert_eq!(
            key(&KERNEL.replace("kind: kernel", "kind: kernel\n  command: make")).as_deref(),
            Some("build.command")
        );
        assert_eq!(
            key(&KERNEL.replace("'CONFIG_PREEMPT_NONE=y'", "'PREEMPT=y'")).as_deref(),
            Some("build.config[0]")
        );
        assert_eq!(
            key(&KERNEL.replace("gcc-12", "'gcc 12'")).as_deref(),
            Some("compiler")
        );
        assert_eq!(
            key(&SPEC.replace("./bench", "./bench\n  results_file: /tmp/x")).as_deref(),
            Some("run.results_file")
        );
    }

    #[test]
    fn config_lines() {
        assert!(is_config_line("CONFIG_HZ=1000"));
        assert!(is_config_line("CONFIG_CMDLINE=\"quiet\""));
        assert!(is_config_line("# CONFIG_KASAN is not set"));
        assert!(!is_config_line("CONFIG_=y"));
        assert!(!is_config_line("CONFIG_HZ"));
        assert!(!is_config_line("HZ=100"));
        assert!(!is_config_line("# CONFIG_kasan is not set"));
    }
}
