//! A real OpenSSH server on loopback, started by the test with its own host and client
//! keys, standing in for a test host's sshd where no VM is needed (shared by the worker's
//! and the CLI's tests).

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (openssh-client)");
    assert!(status.success());
}

/// The kernel release the loopback "host" runs: this machine's.
pub fn running_release() -> String {
    nix::sys::utsname::uname()
        .unwrap()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// The user the tests run as, who logs in to the loopback sshd.
pub fn user() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name
}

impl Sshd {
    /// Starts sshd on a free 127.0.0.1 port; `boot_id` holds `boot-0`.
    pub fn start() -> Sshd {
        Sshd::start_with(tempfile::tempdir().unwrap(), "")
    }

    /// A host whose kernel refuses kexec (as a locked-down or secure-boot kernel does): the
    /// sessions' PATH starts with a `kexec` that fails, and leaves out the sbin folders.
    pub fn start_without_kexec() -> Sshd {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("fakebin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(
            bin.join("kexec"),
            "#!/bin/sh\necho 'kexec_load failed: Operation not permitted' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(
            bin.join("kexec"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let extra = format!("SetEnv PATH={}:/usr/bin:/bin\n", bin.display());
        Sshd::start_with(dir, &extra)
    }

    fn start_with(dir: tempfile::TempDir, extra_config: &str) -> Sshd {
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nLogLevel ERROR\n\
             {extra_config}",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        std::fs::write(d.join("boot_id"), "boot-0\n").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .expect("/usr/sbin/sshd (openssh-server)");
        let sshd = Sshd { dir, port, child };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "sshd did not listen: {}",
                std::fs::read_to_string(sshd.path().join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        sshd
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
