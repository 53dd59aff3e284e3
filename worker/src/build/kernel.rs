//! The kernel recipe: the job's kconfig (fetched from the server) plus its `build.config`
//! lines, `make olddefconfig`, the boot image and (when the config has modules) the modules,
//! with the job's compiler, through ccache when it is installed.
//!
//! The source tree is one per repository, moved from commit to commit, and the object tree
//! one per (repository, architecture, compiler): an incremental build, as in `git bisect`
//! by hand. Jobs that differ only in their kconfig or pinned options share the object tree
//! too: `make olddefconfig` rewrites `.config` and Kbuild rebuilds only what the changed
//! options reach, so changing one pinned option does not rebuild from scratch.
//!
//! Every kernel carries its commit in its release: `LOCALVERSION=-pb<12 hex digits>` is
//! appended (`6.1.158-pb0123456789ab`), so the runners can tell one commit's kernel from
//! another's; the build's version string (`uname -v`: build number and time, in the image's
//! boot header) tells two builds of one commit apart. The cache entry gets what deployment
//! needs: `vmlinuz`, `modules.cpio` (`/lib/modules/<release>` as an initramfs piece),
//! `kernel.release`, `config` and `System.map`.

use super::{BuildError, Builder};
use crate::checkout::short_hash;
use crate::exec::{self, Output};
use crate::guest::quote;
use crate::initramfs::CpioWriter;
use perfbisect_wire::JobSpec;
use perfbisect_wire::job::{KERNEL_IMAGE, KERNEL_MODULES, KERNEL_RELEASE};
use perfbisect_wire::worker::TaskAssignment;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the recipe appends to the release of the kernel built from `sha`.
pub fn localversion(sha: &str) -> String {
    let short: String = sha.chars().take(12).collect();
    format!("-pb{short}")
}

/// The shell steps of the recipe. `$SRC`, `$OBJ`, `$OUT` and `$STAGE` are set by the caller.
pub fn script(job: &JobSpec, sha: &str, jobs: usize, ccache: bool) -> String {
    let arch = job.build.arch.as_deref().unwrap_or("x86_64");
    let image = job.build.image.as_deref().unwrap_or("bzImage");
    let cc = job.compiler.as_deref().unwrap_or("gcc");
    let cc_arg = if ccache {
        format!("ccache {cc}")
    } else {
        cc.to_string()
    };
    format!(
        r#"set -eu
M() {{ make -C "$SRC" O="$OBJ" ARCH={arch} CC={cc_q} HOSTCC={host_q} LOCALVERSION={lv} "$@"; }}
M olddefconfig
M -j{jobs} {image}
if grep -q '^CONFIG_MODULES=y' "$OBJ/.config"; then
  M -j{jobs} modules
  rm -rf "$STAGE"
  M INSTALL_MOD_PATH="$STAGE" INSTALL_MOD_STRIP=1 modules_install
fi
M -s kernelrelease > "$OUT/{release}"
cp "$OBJ/$(M -s image_name)" "$OUT/{kernel}"
cp "$OBJ/.config" "$OUT/config"
cp "$OBJ/System.map" "$OUT/System.map" 2>/dev/null || true
"#,
        cc_q = quote(&cc_arg),
        lv = quote(&localversion(sha)),
        host_q = quote(cc),
        release = KERNEL_RELEASE,
        kernel = KERNEL_IMAGE,
    )
}

/// The starting `.config`: the stored kconfig, then the job's pinned options (later lines
/// win in Kconfig).
pub fn dot_config(kconfig: &str, job: &JobSpec) -> String {
    let mut text = kconfig.trim_end().to_string();
    text.push('\n');
    for line in &job.build.config {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Builds the kernel in `src` (a checked-out tree) with `obj` as its object tree, leaving
/// the artifacts in `out`. Usable without a server: the opt-in kernel test calls it.
#[allow(clippy::too_many_arguments)]
pub async fn build_tree(
    job: &JobSpec,
    sha: &str,
    kconfig: &str,
    src: &Path,
    obj: &Path,
    out: &Path,
    jobs: usize,
    ccache_dir: Option<&Path>,
    env: &[(String, String)],
    cancel: &mut watch::Receiver<bool>,
) -> Result<Output, BuildError> {
    let started = Instant::now();
    std::fs::create_dir_all(obj)?;
    std::fs::create_dir_all(out)?;
    std::fs::write(obj.join(".config"), dot_config(kconfig, job))?;
    let stage = obj.join("modules-staging");
    let mut env = env.to_vec();
    for (k, v) in [
        ("SRC", src),
        ("OBJ", obj),
        ("OUT", out),
        ("STAGE", stage.as_path()),
    ] {
        env.push((k.into(), v.display().to_string()));
    }
    if let Some(dir) = ccache_dir {
        // Hash paths relative to the tree, so one commit's objects serve the next.
        env.push(("CCACHE_DIR".into(), dir.display().to_string()));
        env.push(("CCACHE_BASEDIR".into(), src.display().to_string()));
        env.push(("CCACHE_NOHASHDIR".into(), "1".into()));
    }
    let output = exec::shell(
        &script(job, sha, jobs, ccache_dir.is_some()),
        src,
        &env,
        Duration::from_secs(job.timeouts.build_secs),
        cancel,
    )
    .await?;
    if output.success() {
        let release = std::fs::read_to_string(out.join(KERNEL_RELEASE))?;
        let modules = stage.join("lib/modules").join(release.trim());
        if modules.is_dir() {
            let file = std::fs::File::create(out.join(KERNEL_MODULES))?;
            let mut w = CpioWriter::new(std::io::BufWriter::new(file));
            for d in ["lib", "lib/modules"] {
                w.dir(d)?;
            }
            w.dir(&format!("lib/modules/{}", release.trim()))?;
            w.tree(&modules, &format!("lib/modules/{}", release.trim()))?;
            w.finish()?;
        }
        tracing::info!(
            secs = started.elapsed().as_secs(),
            release = release.trim(),
            "kernel built"
        );
    }
    Ok(output)
}

pub async fn build(
    builder: &Builder,
    task: &TaskAssignment,
    sha: &str,
    env: &[(String, String)],
    cancel: &mut watch::Receiver<bool>,
) -> Result<Output, BuildError> {
    let job = &task.job;
    let name = job
        .kconfig
        .clone()
        .expect("validated: a kernel recipe names its kconfig");
    let kconfig = builder
        .client
        .kconfig(&name)
        .await
        .map_err(|source| BuildError::Kconfig {
            name: name.clone(),
            source,
        })?;
    let (ws, url, sha_owned) = (
        builder.workspace.clone(),
        task.repository_url.clone(),
        sha.to_string(),
    );
    let src = tokio::task::spawn_blocking(move || ws.source_tree(&url, &sha_owned))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
    let build_hash = job.build_hash();
    let obj = builder
        .workspace
        .root()
        .join("obj")
        .join(object_tree_name(&task.repository_url, job));
    let out = builder.cache.begin(sha, &build_hash)?;
    let ccache_dir = (builder.ccache && super::which("ccache").is_some())
        .then(|| builder.workspace.root().join("ccache"));
    build_tree(
        job,
        sha,
        &kconfig,
        &src,
        &obj,
        &out,
        builder.jobs,
        ccache_dir.as_deref(),
        env,
        cancel,
    )
    .await
}

/// The object tree's directory name: one per repository, architecture and compiler. The
/// config is not part of it (see the module's comment).
pub fn object_tree_name(repository_url: &str, job: &JobSpec) -> String {
    let arch = job.build.arch.as_deref().unwrap_or("x86_64");
    let cc = job.compiler.as_deref().unwrap_or("gcc");
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{}-{}-{}", short_hash(repository_url), safe(arch), safe(cc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobSpec {
        JobSpec::from_yaml(
            "testcase: t\ntbox_group: vm\nkconfig: base\ncompiler: gcc-12\nbuild:\n  kind: kernel\n  config: ['CONFIG_HZ_100=y', '# CONFIG_KASAN is not set']\ndeploy: {kind: qemu}\nrun: {command: 'true'}\n",
        )
        .unwrap()
    }

    #[test]
    fn pinned_options_come_after_the_stored_config_so_they_win() {
        let text = dot_config("CONFIG_HZ_250=y\nCONFIG_KASAN=y\n\n", &job());
        assert_eq!(
            text,
            "CONFIG_HZ_250=y\nCONFIG_KASAN=y\nCONFIG_HZ_100=y\n# CONFIG_KASAN is not set\n"
        );
    }

    #[test]
    fn a_changed_pinned_option_keeps_the_object_tree() {
        let a = job();
        let mut b = job();
        b.build.config.push("CONFIG_PREEMPT_NONE=y".into());
        assert_ne!(
            a.build_hash(),
            b.build_hash(),
            "a new recipe, a new cache entry"
        );
        assert_eq!(
            object_tree_name("file:///srv/linux", &a),
            object_tree_name("file:///srv/linux", &b),
            "the same object tree, rebuilt incrementally"
        );
        let mut c = job();
        c.compiler = Some("clang-16".into());
        assert_ne!(
            object_tree_name("file:///srv/linux", &a),
            object_tree_name("file:///srv/linux", &c)
        );
    }

    #[test]
    fn the_release_carries_the_commit() {
        let s = script(&job(), "0123456789abcdef0123", 2, false);
        assert!(s.contains("LOCALVERSION='-pb0123456789ab'"), "{s}");
    }

    /// The arguments make gets, one per line, from running the recipe with a `make` that
    /// records them (and says the release is what it was given as LOCALVERSION).
    fn make_arguments(ccache: bool) -> (Vec<String>, String) {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let log = dir.path().join("make.log");
        std::fs::write(
            bin.join("make"),
            format!(
                "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> {log}; done\n\
                 for a in \"$@\"; do case \"$a\" in\n\
                   kernelrelease) for b in \"$@\"; do case \"$b\" in LOCALVERSION=*) echo \"6.1${{b#LOCALVERSION=}}\";; esac; done;;\n\
                   image_name) echo vmlinux;;\n\
                 esac; done\n",
                log = log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            bin.join("make"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let (obj, out) = (dir.path().join("obj dir"), dir.path().join("out"));
        std::fs::create_dir_all(&obj).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(obj.join(".config"), "").unwrap();
        std::fs::write(obj.join("vmlinux"), "").unwrap();
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(script(&job(), "0123456789abcdef0123", 2, ccache))
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("SRC", dir.path())
            .env("OBJ", &obj)
            .env("OUT", &out)
            .env("STAGE", dir.path().join("stage"))
            .status()
            .unwrap();
        assert!(status.success());
        let args = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let release = std::fs::read_to_string(out.join(KERNEL_RELEASE)).unwrap();
        (args, release)
    }

    #[test]
    fn make_gets_the_release_suffix_and_the_compiler_unquoted_as_one_argument_each() {
        let (args, release) = make_arguments(true);
        // The release the runners compare `uname -r` with: no quote characters in it.
        assert_eq!(release.trim(), "6.1-pb0123456789ab");
        assert!(
            args.contains(&"LOCALVERSION=-pb0123456789ab".to_string()),
            "{args:?}"
        );
        assert!(args.contains(&"CC=ccache gcc-12".to_string()), "{args:?}");
        assert!(args.contains(&"HOSTCC=gcc-12".to_string()), "{args:?}");
        assert!(args.iter().any(|a| a.ends_with("/obj dir")), "{args:?}");
        assert!(args.iter().all(|a| !a.contains('\'')), "{args:?}");
    }

    #[test]
    fn the_recipe_builds_out_of_tree_with_the_job_s_compiler() {
        let plain = script(&job(), "0123456789ab", 8, false);
        assert!(
            plain.contains("O=\"$OBJ\" ARCH=x86_64 CC='gcc-12' HOSTCC='gcc-12'"),
            "{plain}"
        );
        assert!(plain.contains("-j8 bzImage"), "{plain}");
        assert!(plain.contains("olddefconfig"));
        let cached = script(&job(), "0123456789ab", 8, true);
        assert!(
            cached.contains("CC='ccache gcc-12' HOSTCC='gcc-12'"),
            "{cached}"
        );
    }
}
