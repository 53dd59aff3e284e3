//! The embedded PostgreSQL cluster: used when no `DATABASE_URL` is given.
//!
//! The cluster lives in the server's data directory and is run with the system's
//! `initdb`/`pg_ctl`. PostgreSQL refuses to run as root, so as root the cluster belongs to
//! the `postgres` system user and every command runs through `runuser`.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found in PATH or /usr/lib/postgresql/*/bin; \
         install them with `apt-get install -y postgresql`, or set DATABASE_URL to an existing server"
    )]
    NotInstalled,
    #[error(
        "running as root, but there is no `postgres` system user to own the cluster (install the postgresql package, or run as another user)"
    )]
    NoPostgresUser,
    #[error("{what} failed: {detail}")]
    Command { what: String, detail: String },
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
}

/// A running cluster that this process started or found running.
#[derive(Debug, Clone)]
pub struct Cluster {
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    run_as: Option<String>,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> PgError {
    let what = what.into();
    move |e| PgError::Io(what, e)
}

/// Finds the directory holding `initdb` and `pg_ctl`.
pub fn find_bin_dir() -> Result<PathBuf, PgError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    // Debian's versioned directories first (newest first): /usr/local/bin may hold only some links.
    if let Ok(entries) = fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .collect();
        versions.sort();
        versions.reverse();
        dirs.extend(versions);
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .find(|d| {
            d.join("initdb").is_file() && d.join("pg_ctl").is_file() && d.join("postgres").is_file()
        })
        .ok_or(PgError::NotInstalled)
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Can `uid` (with `gid`) reach `path` through its ancestors?
fn traversable_by(path: &Path, uid: u32, gid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors().skip(1).all(|dir| match fs::metadata(dir) {
        Ok(m) => {
            let mode = m.permissions().mode();
            (m.uid() == uid && mode & 0o100 != 0)
                || (m.gid() == gid && mode & 0o010 != 0)
                || mode & 0o001 != 0
        }
        Err(_) => true,
    })
}

impl Cluster {
    /// Starts the cluster for data directory `data_dir` (creating it on first use), or
    /// attaches to it when it is already running. Safe to call from several processes at
    /// once: they serialise on a lock file.
    pub fn start(data_dir: &Path) -> Result<Cluster, PgError> {
        let bin = find_bin_dir()?;
        fs::create_dir_all(data_dir).map_err(io(format!("creating {}", data_dir.display())))?;
        let data_dir = data_dir
            .canonicalize()
            .map_err(io("resolving the data directory"))?;
        let (mut pgdata, run_as) = if is_root() {
            let user = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .ok_or(PgError::NoPostgresUser)?;
            let want = data_dir.join("pg");
            let pgdata = if traversable_by(&want, user.uid.as_raw(), user.gid.as_raw()) {
                want
            } else {
                // The postgres user cannot reach the data directory (e.g. under /root, mode 700):
                // keep the cluster in a place it can reach, named after the data directory.
                use sha2::Digest;
                let tag = hex::encode(
                    &sha2::Sha256::digest(data_dir.as_os_str().as_encoded_bytes())[..6],
                );
                PathBuf::from(format!("/var/tmp/perfbisect-pg/{tag}"))
            };
            (pgdata, Some("postgres".to_string()))
        } else {
            (data_dir.join("pg"), None)
        };
        let lock = File::create(data_dir.join("pg.lock")).map_err(io("creating pg.lock"))?;
        lock.lock().map_err(io("locking pg.lock"))?;
        if let Some(user) = &run_as {
            let parent = pgdata.parent().expect("cluster dir has a parent");
            fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
            if !pgdata.exists() {
                fs::create_dir_all(&pgdata)
                    .map_err(io(format!("creating {}", pgdata.display())))?;
            }
            chown(&pgdata, user)?;
            if parent.starts_with("/var/tmp/perfbisect-pg") {
                fs::set_permissions(parent, fs::Permissions::from_mode(0o755)).ok();
            }
        }
        pgdata = pgdata.canonicalize().unwrap_or(pgdata);
        let mut cluster = Cluster {
            data: pgdata,
            bin,
            port: 0,
            run_as,
        };
        if !cluster.data.join("PG_VERSION").exists() {
            cluster.initdb()?;
        }
        // Where the cluster really is, for scripts that stop it (`pg_ctl -D $(cat pg.datadir) stop`).
        fs::write(
            data_dir.join("pg.datadir"),
            cluster.data.as_os_str().as_encoded_bytes(),
        )
        .map_err(io("writing pg.datadir"))?;
        let port_file = data_dir.join("pg.port");
        if cluster.is_running() {
            cluster.port = fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| PgError::Command {
                    what: "finding the running cluster's port".into(),
                    detail: format!("{} is missing", port_file.display()),
                })?;
        } else {
            cluster.port = free_port()?;
            fs::write(&port_file, cluster.port.to_string()).map_err(io("writing pg.port"))?;
            cluster.pg_ctl_start()?;
        }
        drop(lock);
        Ok(cluster)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Connection URL for database `db` (the superuser `postgres`, trusted on loopback).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(exe);
                c
            }
            None => Command::new(exe),
        }
    }

    fn run(&self, what: &str, mut cmd: Command) -> Result<(), PgError> {
        // pg_ctl's postmaster inherits our stdout otherwise, and keeps a pipe open forever.
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(io(format!("running {what}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(PgError::Command {
                what: what.to_string(),
                detail: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            })
        }
    }

    fn initdb(&self) -> Result<(), PgError> {
        let mut cmd = self.command("initdb");
        cmd.arg("-D").arg(&self.data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-N",
            "-E",
            "UTF8",
            "--locale=C",
        ]);
        self.run("initdb", cmd)
    }

    fn is_running(&self) -> bool {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D").arg(&self.data).arg("status");
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd.status().map(|s| s.success()).unwrap_or(false)
    }

    fn pg_ctl_start(&self) -> Result<(), PgError> {
        let log = self.data.join("server.log");
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&log)
            .arg("-o")
            .arg(format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off",
                self.port,
                self.data.display()
            ))
            .args(["-w", "-t", "60", "start"]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        self.run("pg_ctl start", cmd)
    }

    /// Stops the cluster (fast shutdown: open transactions roll back, data is kept).
    pub fn stop(&self) -> Result<(), PgError> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "stop"]);
        self.run("pg_ctl stop", cmd)
    }
}

fn chown(path: &Path, user: &str) -> Result<(), PgError> {
    let u = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .ok_or(PgError::NoPostgresUser)?;
    nix::unistd::chown(path, Some(u.uid), Some(u.gid))
        .map_err(|e| PgError::Io(format!("chown {} to {user}", path.display()), e.into()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(io("chmod cluster dir"))
}

fn free_port() -> Result<u16, PgError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    Ok(l.local_addr().map_err(io("finding a free port"))?.port())
}

/// For test suites: one cluster shared by every test process of a run (they serialise on
/// its lock file), and a fresh database per caller.
pub mod testing {
    use super::Cluster;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// `PERFBISECT_TEST_PG_DIR`, or `target/test-pg` of the workspace.
    pub fn cluster_dir() -> PathBuf {
        std::env::var_os("PERFBISECT_TEST_PG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-pg"))
    }

    /// Starts (or joins) the suite's cluster and creates an empty database; returns its URL.
    pub async fn fresh_database() -> anyhow::Result<String> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = cluster_dir();
        let cluster = tokio::task::spawn_blocking(move || Cluster::start(&dir)).await??;
        let name = format!(
            "test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            chrono::Utc::now().timestamp_micros()
        );
        crate::db::ensure_database(&cluster.url("postgres"), &name).await?;
        Ok(cluster.url(&name))
    }
}
