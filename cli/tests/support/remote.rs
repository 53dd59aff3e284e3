//! A lab's network: a private CA and its certificates (openssl), a smart-HTTP git server
//! over TLS (`git http-backend` as CGI behind Debian's lighttpd with mod_openssl and basic
//! authentication), an sshd with key authentication serving git, and a `perfbisect server`
//! that speaks HTTPS. Every one is a real process on 127.0.0.1, stopped when dropped.

use crate::common::{API_TOKEN, ENROLL_TOKEN, EXE};
use perfbisect_cli::api::Api;
use perfbisect_cli::demo::wait_healthy;
use perfbisect_cli::processes::{Process, free_port};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn run(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/test-packages)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A private CA and a server certificate for `localhost` and 127.0.0.1 signed by it.
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let ca_subject = "/CN=perfbisect lab CA";
        run(
            dir,
            "openssl",
            &[
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                "ca.pem", "-days", "2", "-subj", ca_subject,
            ],
        );
        run(
            dir,
            "openssl",
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=localhost",
            ],
        );
        std::fs::write(
            dir.join("leaf.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(
            dir,
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "leaf.pem",
                "-days",
                "2",
                "-extfile",
                "leaf.ext",
            ],
        );
        Pki {
            ca: dir.join("ca.pem"),
            cert: dir.join("leaf.pem"),
            key: dir.join("leaf.key"),
        }
    }
}

fn wait_port(port: u16, what: &str, log: &Path) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} did not listen: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `git http-backend` over HTTPS with basic authentication, serving the bare repositories
/// in `root` at `https://localhost:PORT/git/<name>`.
pub struct HttpsGit {
    pub port: u16,
    _process: Process,
}

impl HttpsGit {
    pub fn start(dir: &Path, pki: &Pki, root: &Path, user: &str, password: &str) -> HttpsGit {
        std::fs::create_dir_all(dir).unwrap();
        let port = free_port().unwrap();
        std::fs::write(dir.join("users"), format!("{user}:{password}\n")).unwrap();
        let backend = String::from_utf8(
            Command::new("git")
                .arg("--exec-path")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let backend = Path::new(backend.trim()).join("git-http-backend");
        let config = format!(
            r#"server.modules = ("mod_alias", "mod_setenv", "mod_auth", "mod_authn_file", "mod_cgi", "mod_openssl")
server.document-root = "{d}"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{d}/error.log"
ssl.engine = "enable"
ssl.pemfile = "{cert}"
ssl.privkey = "{key}"
auth.backend = "plain"
auth.backend.plain.userfile = "{d}/users"
alias.url = ("/git" => "{backend}")
$HTTP["url"] =~ "^/git" {{
  cgi.assign = ("" => "")
  setenv.set-environment = ("GIT_PROJECT_ROOT" => "{root}", "GIT_HTTP_EXPORT_ALL" => "1")
  auth.require = ("" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
}}
"#,
            d = dir.display(),
            cert = pki.cert.display(),
            key = pki.key.display(),
            backend = backend.display(),
            root = root.display(),
        );
        std::fs::write(dir.join("lighttpd.conf"), config).unwrap();
        let mut cmd = Command::new("/usr/sbin/lighttpd");
        cmd.arg("-D").arg("-f").arg(dir.join("lighttpd.conf"));
        let log = dir.join("lighttpd.log");
        let process = Process::spawn("lighttpd", cmd, &log)
            .expect("/usr/sbin/lighttpd (lighttpd, lighttpd-mod-openssl)");
        wait_port(port, "lighttpd", &log);
        HttpsGit {
            port,
            _process: process,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("https://localhost:{}/git/{name}", self.port)
    }
}

/// sshd on 127.0.0.1 accepting one client key, for git over ssh.
pub struct GitSshd {
    pub port: u16,
    /// The key sshd accepts, and one it does not know.
    pub client_key: PathBuf,
    pub stranger_key: PathBuf,
    pub known_hosts: PathBuf,
    _process: Process,
}

fn keygen(path: &Path) {
    run(
        path.parent().unwrap(),
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            path.to_str().unwrap(),
        ],
    );
}

impl GitSshd {
    pub fn start(dir: &Path) -> GitSshd {
        std::fs::create_dir_all(dir).unwrap();
        for k in ["host_key", "client_key", "stranger_key"] {
            keygen(&dir.join(k));
        }
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port().unwrap();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nLogLevel ERROR\n",
            d = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        let host_pub = std::fs::read_to_string(dir.join("host_key.pub")).unwrap();
        let mut fields = host_pub.split_whitespace();
        let (kind, key) = (fields.next().unwrap(), fields.next().unwrap());
        std::fs::write(
            dir.join("known_hosts"),
            format!("[127.0.0.1]:{port} {kind} {key}\n"),
        )
        .unwrap();
        let mut cmd = Command::new("/usr/sbin/sshd");
        cmd.args(["-D", "-e", "-f"]).arg(dir.join("sshd_config"));
        let log = dir.join("sshd.log");
        let process = Process::spawn("sshd", cmd, &log).expect("/usr/sbin/sshd (openssh-server)");
        wait_port(port, "sshd", &log);
        GitSshd {
            port,
            client_key: dir.join("client_key"),
            stranger_key: dir.join("stranger_key"),
            known_hosts: dir.join("known_hosts"),
            _process: process,
        }
    }

    pub fn url(&self, path: &Path) -> String {
        let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
            .unwrap()
            .unwrap()
            .name;
        format!("ssh://{user}@127.0.0.1:{}{}", self.port, path.display())
    }
}

/// `perfbisect server` over HTTPS on `port` with `env` (the git credentials), and an API
/// client that trusts the lab's CA.
pub async fn tls_server(
    lab_dir: &Path,
    db_url: &str,
    port: u16,
    pki: &Pki,
    env: &[(&str, &Path)],
) -> (Process, Api) {
    let mut cmd = Command::new(EXE);
    cmd.arg("server")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(lab_dir.join("server"))
        .arg("--tls-cert")
        .arg(&pki.cert)
        .arg("--tls-key")
        .arg(&pki.key)
        .env("PERFBISECT_API_TOKEN", API_TOKEN)
        .env("PERFBISECT_ENROLL_TOKEN", ENROLL_TOKEN)
        .env("PERFBISECT_LEASE_SECS", "30")
        // The lab's git servers are on loopback: the URL policy must allow it.
        .env("PERFBISECT_REPO_ALLOW_PRIVATE", "true")
        .env("DATABASE_URL", db_url);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Process::spawn("server", cmd, &lab_dir.join("server.log")).unwrap();
    let api = Api::with_ca(
        &format!("https://localhost:{port}"),
        Some(API_TOKEN.into()),
        &pki.ca,
    )
    .unwrap();
    wait_healthy(&api, &mut p, Duration::from_secs(120))
        .await
        .unwrap();
    (p, api)
}

/// A worker that reaches the server over HTTPS (trusting the lab's CA) and repositories
/// with `env`.
pub fn tls_worker(
    lab_dir: &Path,
    api: &Api,
    pki: &Pki,
    name: &str,
    env: &[(&str, &Path)],
) -> Process {
    let mut cmd = Command::new(EXE);
    cmd.arg("worker")
        .arg("--server")
        .arg(api.base())
        .arg("--ca-file")
        .arg(&pki.ca)
        .arg("--name")
        .arg(name)
        .arg("--host-group")
        .arg("local")
        .arg("--work-dir")
        .arg(lab_dir.join(name))
        .env("PERFBISECT_ENROLL_TOKEN", ENROLL_TOKEN);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Process::spawn(name, cmd, &lab_dir.join(format!("{name}.log"))).unwrap()
}
