//! The embedded PostgreSQL cluster: used when no `DATABASE_URL` is given.
//!
//! The cluster lives in the server's data directory and is run with the system's
//! `initdb`/`pg_ctl`. PostgreSQL refuses to run as root, so as root the cluster belongs to
//! the `postgres` system user and every command runs through `runuser`.
//!
//! Who may connect: the cluster listens only on a Unix socket inside its own data directory
//! (mode 700, so only its owner and root reach it), and even there it asks for the
//! `postgres` role's password (scram-sha-256), which only the server's data directory holds
//! (`pg.password`, mode 600). TCP is off unless `ClusterOptions::tcp` asks for it. A cluster
//! made by an earlier version (trust, TCP) is converted on its next start.

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

/// How the cluster runs.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Write-ahead log and data reach the disk before a commit returns. Only the test
    /// suite's throwaway cluster turns it off (for speed).
    pub fsync: bool,
    /// Also listen on this address (with the same password), for tools on other hosts.
    pub tcp: Option<std::net::IpAddr>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            fsync: true,
            tcp: None,
        }
    }
}

/// A running cluster that this process started or found running.
#[derive(Debug, Clone)]
pub struct Cluster {
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    run_as: Option<String>,
    password: String,
    options: ClusterOptions,
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
        Self::start_with(data_dir, &ClusterOptions::default())
    }

    /// `start` with explicit options.
    pub fn start_with(data_dir: &Path, options: &ClusterOptions) -> Result<Cluster, PgError> {
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
        let password_file = data_dir.join("pg.password");
        let existing_password = fs::read_to_string(&password_file)
            .ok()
            .map(|s| s.trim().to_string());
        let mut cluster = Cluster {
            data: pgdata,
            bin,
            port: 0,
            run_as,
            password: existing_password
                .clone()
                .unwrap_or_else(crate::auth::new_token),
            options: options.clone(),
        };
        let fresh = !cluster.data.join("PG_VERSION").exists();
        if fresh {
            cluster.initdb()?;
        } else if existing_password.is_none() {
            // Made by an earlier version (trust authentication, TCP): give the superuser a
            // password before anything else may connect.
            tracing::warn!(dir = %cluster.data.display(), "converting the embedded PostgreSQL cluster to password authentication on a private socket");
            if cluster.is_running() {
                cluster.stop()?;
            }
            cluster.set_password()?;
        }
        if existing_password.is_none() {
            write_private(&password_file, cluster.password.as_bytes())?;
        }
        cluster.write_hba()?;
        // Where the cluster really is, for scripts that stop it (`pg_ctl -D $(cat pg.datadir) stop`).
        fs::write(
            data_dir.join("pg.datadir"),
            cluster.data.as_os_str().as_encoded_bytes(),
        )
        .map_err(io("writing pg.datadir"))?;
        let port_file = data_dir.join("pg.port");
        let marker = cluster.data.join("perfbisect.socket-only");
        if cluster.is_running() && !marker.exists() {
            // Started by an earlier version on TCP: restart it on the socket only.
            cluster.stop()?;
        }
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
            fs::write(&marker, b"").map_err(io("writing the socket marker"))?;
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

    /// Connection URL for database `db`: the superuser `postgres` with its password, over
    /// the cluster's Unix socket.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://postgres:{}@localhost:{}/{db}?host={}",
            self.password,
            self.port,
            percent_encode_path(&self.data)
        )
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
        // initdb reads the superuser's password from a file (never the command line); it
        // sits beside the cluster, readable by the cluster's owner only, for this one call.
        let pwfile = self.data.with_extension("pwfile");
        let _ = fs::remove_file(&pwfile);
        write_private(&pwfile, self.password.as_bytes())?;
        if let Some(user) = &self.run_as {
            chown_file(&pwfile, user)?;
        }
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(&self.data)
            .args([
                "-U",
                "postgres",
                "-A",
                "scram-sha-256",
                "-N",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .arg(format!("--pwfile={}", pwfile.display()));
        let result = self.run("initdb", cmd);
        let _ = fs::remove_file(&pwfile);
        result
    }

    /// Sets the superuser's password of a stopped cluster (single-user mode, the statement
    /// on standard input, so the password is on no command line).
    fn set_password(&self) -> Result<(), PgError> {
        use std::io::Write;
        let mut cmd = self.command("postgres");
        cmd.arg("--single")
            .arg("-D")
            .arg(&self.data)
            .arg("postgres")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().map_err(io("running postgres --single"))?;
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(
                format!(
                    "SET password_encryption = 'scram-sha-256';\nALTER ROLE postgres PASSWORD '{}';\n",
                    self.password
                )
                .as_bytes(),
            )
            .map_err(io("setting the superuser's password"))?;
        let out = child
            .wait_with_output()
            .map_err(io("running postgres --single"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(PgError::Command {
                what: "setting the superuser's password".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Who may connect how: only with the password, over the socket (and TCP when asked).
    fn write_hba(&self) -> Result<(), PgError> {
        let mut hba = String::from(
            "# Written by perfbisect at every start: passwords only, on the private socket.\n\
             local all all scram-sha-256\n",
        );
        if self.options.tcp.is_some() {
            hba.push_str("host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n");
        }
        let path = self.data.join("pg_hba.conf");
        fs::write(&path, hba).map_err(io("writing pg_hba.conf"))?;
        if let Some(user) = &self.run_as {
            chown_file(&path, user)?;
        }
        Ok(())
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
                "-p {} -k {} -c unix_socket_permissions=0700 -c listen_addresses='{}' -c max_connections=200 -c fsync={}",
                self.port,
                self.data.display(),
                self.options.tcp.map(|a| a.to_string()).unwrap_or_default(),
                if self.options.fsync { "on" } else { "off" },
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

fn chown_file(path: &Path, user: &str) -> Result<(), PgError> {
    let u = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .ok_or(PgError::NoPostgresUser)?;
    nix::unistd::chown(path, Some(u.uid), Some(u.gid))
        .map_err(|e| PgError::Io(format!("chown {} to {user}", path.display()), e.into()))
}

/// Creates `path` with mode 600 from the start (never readable by others, not even briefly).
pub fn write_private(path: &Path, contents: &[u8]) -> Result<(), PgError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("creating {}", path.display())))?;
    f.write_all(contents)
        .map_err(io(format!("writing {}", path.display())))
}

/// A path as a URL query value.
fn percent_encode_path(path: &Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The port only names the socket file (`.s.PGSQL.<port>`); with TCP on it is also the
/// TCP port, so it must be free there.
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
        // The suite's cluster is thrown away after the run: fsync off for speed (never for a
        // real server's cluster).
        let options = super::ClusterOptions {
            fsync: false,
            tcp: None,
        };
        let cluster =
            tokio::task::spawn_blocking(move || Cluster::start_with(&dir, &options)).await??;
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
