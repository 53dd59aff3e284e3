//! A lab of VMs standing in for bare-metal hosts, started by the tests themselves.
//!
//! Each host is a qemu guest (Debian's prebuilt kernel, an initramfs of static busybox,
//! dropbear's sshd, kexec-tools and the e1000 driver) reachable over ssh on a 127.0.0.1 port
//! (user-mode networking, `hostfwd`), with a QMP socket. Its power is what a real BMC
//! controls: `ipmi_sim` (OpenIPMI's BMC simulator) answers `ipmitool -I lanplus` and runs
//! the host's chassis-control script, which starts the VM (power on), kills it (power off)
//! or does both (reset). Everything lives in a temporary directory; dropping the host stops
//! ipmi_sim and the VM.

use super::sshd::keygen;
use perfbisect_worker::config::SshConfig;
use perfbisect_worker::initramfs::CpioWriter;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// PID 1 of a lab host: the basics, the network, sshd, then wait forever like a server.
const LAB_INIT: &str = r#"#!/bin/sh
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run /var/log
hostname lab-host
# Debian's kernel has e1000 as a module; a kernel built for the lab has it built in.
[ -d /sys/bus/pci/drivers/e1000 ] || insmod /lib/modules/e1000.ko
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
dropbear -s -E -r /etc/dropbear/host_key -p 22 -P /run/dropbear.pid 2>/dev/console
echo "lab-host up: $(cat /proc/sys/kernel/random/boot_id)" > /dev/console
while :; do sleep 3600; done
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The shared libraries `binary` loads, from `ldd`.
fn libraries(binary: &str) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(binary).output().expect("ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

fn which(name: &str) -> String {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = format!("{dir}/{name}");
        if Path::new(&p).exists() {
            return p;
        }
    }
    panic!("{name} is missing: apt-get install $(cat scripts/test-packages)");
}

/// A file a test adds to the lab host's root filesystem: path, mode, content.
pub type ExtraFile = (String, u32, Vec<u8>);

/// The lab host's root filesystem (gzip-compressed cpio), authorising `client_pub`, with
/// `extra` files (a test's benchmark) added.
pub fn lab_rootfs(dir: &Path, client_pub: &str, extra: &[ExtraFile]) -> PathBuf {
    let host_key = dir.join("dropbear_host_key");
    let status = Command::new(which("dropbearkey"))
        .args(["-t", "ed25519", "-f"])
        .arg(&host_key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("dropbearkey (dropbear-bin)");
    assert!(status.success());
    let mut w = CpioWriter::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    let mut add_dirs = |w: &mut CpioWriter<Vec<u8>>, path: &str| {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if dirs.insert(at.clone()) {
                w.dir(&at).unwrap();
            }
        }
    };
    for d in [
        "bin",
        "sbin",
        "etc/dropbear",
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "root",
        "lib/modules",
    ] {
        add_dirs(&mut w, d);
    }
    let busybox = which("busybox");
    w.file("bin/busybox", 0o755, &std::fs::read(&busybox).unwrap())
        .unwrap();
    let list = Command::new(&busybox).arg("--list").output().unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" && !applet.is_empty() {
            w.symlink(&format!("bin/{applet}"), "busybox").unwrap();
        }
    }
    let dropbear = which("dropbear");
    let kexec = which("kexec");
    w.file("sbin/dropbear", 0o755, &std::fs::read(&dropbear).unwrap())
        .unwrap();
    w.file("sbin/kexec", 0o755, &std::fs::read(&kexec).unwrap())
        .unwrap();
    let mut libs: Vec<PathBuf> = libraries(&dropbear);
    libs.extend(libraries(&kexec));
    libs.sort();
    libs.dedup();
    for lib in libs {
        let rel = lib.to_string_lossy().trim_start_matches('/').to_string();
        add_dirs(&mut w, Path::new(&rel).parent().unwrap().to_str().unwrap());
        w.file(&rel, 0o755, &std::fs::read(&lib).unwrap()).unwrap();
    }
    let e1000 = super::debian_kernel().with_file_name("e1000.ko");
    w.file(
        "lib/modules/e1000.ko",
        0o644,
        &std::fs::read(&e1000).expect("e1000.ko from scripts/test-kernel.sh"),
    )
    .unwrap();
    w.file(
        "etc/dropbear/host_key",
        0o600,
        &std::fs::read(&host_key).unwrap(),
    )
    .unwrap();
    w.file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n")
        .unwrap();
    w.file("etc/group", 0o644, b"root:x:0:\n").unwrap();
    w.file("etc/shells", 0o644, b"/bin/sh\n").unwrap();
    w.dir("root/.ssh").unwrap();
    w.file("root/.ssh/authorized_keys", 0o600, client_pub.as_bytes())
        .unwrap();
    w.file("init", 0o755, LAB_INIT.as_bytes()).unwrap();
    for (path, mode, content) in extra {
        add_dirs(&mut w, Path::new(path).parent().unwrap().to_str().unwrap());
        w.file(path, *mode, content).unwrap();
    }
    let cpio = w.finish().unwrap();
    let out = dir.join("lab.cpio.gz");
    let mut gz = Command::new("gzip")
        .args(["-1", "-c"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .expect("gzip");
    gz.stdin.take().unwrap().write_all(&cpio).unwrap();
    assert!(gz.wait().unwrap().success());
    out
}

/// One lab host: a VM behind a simulated BMC.
pub struct LabHost {
    pub dir: tempfile::TempDir,
    pub ssh_port: u16,
    pub bmc_port: u16,
    pub rootfs_dir: PathBuf,
    ipmi_sim: Option<Child>,
}

impl Drop for LabHost {
    fn drop(&mut self) {
        if let Some(mut sim) = self.ipmi_sim.take() {
            let _ = sim.kill();
            let _ = sim.wait();
        }
        self.kill_vm();
    }
}

impl LabHost {
    /// Prepares the host (rootfs, keys, start script, BMC) and powers it on through IPMI.
    pub fn start() -> LabHost {
        Self::start_with(&[])
    }

    /// `start`, with `extra` files in the host's root filesystem.
    pub fn start_with(extra: &[ExtraFile]) -> LabHost {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        keygen(&d.join("client_key"));
        let client_pub = std::fs::read_to_string(d.join("client_key.pub")).unwrap();
        let rootfs_dir = d.join("rootfs");
        std::fs::create_dir_all(&rootfs_dir).unwrap();
        let rootfs = lab_rootfs(&d, &client_pub, extra);
        std::fs::rename(&rootfs, rootfs_dir.join("lab.cpio.gz")).unwrap();
        let ssh_port = free_port();
        let bmc_port = free_udp_port();
        let kernel = super::debian_kernel();
        // What the chassis's power switch does: start the VM, daemonized, with its pid file.
        let start = format!(
            "#!/bin/sh\nexec qemu-system-x86_64 -accel tcg -m 256 -smp 1 -display none \
             -monitor none -chardev file,id=con,path={d}/console.log,append=on -serial chardev:con \
             -kernel {kernel} -initrd {d}/rootfs/lab.cpio.gz -append 'console=ttyS0 quiet' \
             -nic user,model=e1000,hostfwd=tcp:127.0.0.1:{ssh_port}-:22 \
             -qmp unix:{d}/qmp.sock,server=on,wait=off \
             -pidfile {d}/qemu.pid -daemonize\n",
            d = d.display(),
            kernel = kernel.display(),
        );
        std::fs::write(d.join("start.sh"), start).unwrap();
        // ipmi_sim's chassis control: `<mc> get power` / `<mc> set power 0|1` / `set reset 1`.
        let chassis = format!(
            r#"#!/bin/sh
D={d}
running() {{ [ -s $D/qemu.pid ] && kill -0 "$(cat $D/qemu.pid)" 2>/dev/null; }}
stop() {{
  if running; then
    p=$(cat $D/qemu.pid); kill -9 "$p"
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f $D/qemu.pid
}}
op=$2; shift 2
if [ "$op" = get ]; then
  for p in "$@"; do [ "$p" = power ] && {{ running && echo power:1 || echo power:0; }}; done
  exit 0
fi
while [ $# -ge 2 ]; do
  echo "$1 $2" >> $D/power.log
  case "$1:$2" in
    power:1) running || sh $D/start.sh ;;
    power:0) stop ;;
    reset:1) stop; sh $D/start.sh ;;
  esac
  shift 2
done
"#,
            d = d.display()
        );
        std::fs::write(d.join("chassis.sh"), chassis).unwrap();
        std::fs::write(d.join("bmc-password"), "lab-secret\n").unwrap();
        let lan = format!(
            r#"name "lab"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {bmc_port}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "sh {d}/chassis.sh 0x20"
  user 1 true "" "" user 10 none md2 md5 straight
  user 2 true "admin" "lab-secret" admin 10 none md2 md5 straight
"#,
            d = d.display()
        );
        std::fs::write(d.join("lan.conf"), lan).unwrap();
        std::fs::write(
            d.join("sim.emu"),
            "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n",
        )
        .unwrap();
        std::fs::create_dir_all(d.join("bmc-state")).unwrap();
        let sim = Command::new(which("ipmi_sim"))
            .arg("-c")
            .arg(d.join("lan.conf"))
            .arg("-f")
            .arg(d.join("sim.emu"))
            .arg("-s")
            .arg(d.join("bmc-state"))
            .arg("-n")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(d.join("ipmi_sim.log")).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ipmi_sim (openipmi)");
        let host = LabHost {
            dir,
            ssh_port,
            bmc_port,
            rootfs_dir,
            ipmi_sim: Some(sim),
        };
        // Power on through the BMC, as an operator would; ipmi_sim needs a moment to listen.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = host.ipmitool(&["chassis", "power", "on"]);
            if out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "ipmi_sim did not answer: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        host
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn ipmitool(&self, args: &[&str]) -> std::process::Output {
        Command::new("ipmitool")
            .args([
                "-I",
                "lanplus",
                "-H",
                "127.0.0.1",
                "-C",
                "3",
                "-N",
                "1",
                "-R",
                "2",
            ])
            .args(["-p", &self.bmc_port.to_string(), "-U", "admin", "-f"])
            .arg(self.path().join("bmc-password"))
            .args(args)
            .output()
            .expect("ipmitool")
    }

    /// The power actions the chassis saw (`power 0`, `power 1`, `reset 1`), an action
    /// repeated at once counted once: a command the BMC is slow to answer (starting or
    /// stopping the VM on a loaded machine) is sent again by ipmitool, which the driver runs
    /// with `-N 2 -R 3` (a retransmit after 2 s without an answer), and the chassis then sees
    /// it twice ("power 1", "power 1" at the lab's start; "power 0" twice in a cycle).
    pub fn power_log(&self) -> Vec<String> {
        let mut seen: Vec<String> = std::fs::read_to_string(self.path().join("power.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        seen.dedup();
        seen
    }

    pub fn console(&self) -> String {
        std::fs::read_to_string(self.path().join("console.log")).unwrap_or_default()
    }

    pub fn qmp_socket(&self) -> PathBuf {
        self.path().join("qmp.sock")
    }

    fn kill_vm(&self) {
        if let Ok(pid) = std::fs::read_to_string(self.path().join("qemu.pid"))
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// The worker's settings for this host, with IPMI as its power driver.
    pub fn ssh_config(&self) -> SshConfig {
        let d = self.path();
        SshConfig {
            target: Some("root@127.0.0.1".into()),
            port: self.ssh_port,
            identity: Some(d.join("client_key")),
            options: vec![
                "StrictHostKeyChecking=no".into(),
                "UserKnownHostsFile=/dev/null".into(),
                "LogLevel=ERROR".into(),
            ],
            remote_dir: "/tmp/perfbisect".into(),
            boot_command: None,
            boot_fallback_command: None,
            power_cycle_command: None,
            power_driver: Some("ipmi".into()),
            bmc_host: Some("127.0.0.1".into()),
            bmc_port: self.bmc_port,
            bmc_user: "admin".into(),
            bmc_password_file: Some(d.join("bmc-password")),
            bmc_cipher_suite: Some(3),
            qmp_socket: None,
            boot_id_command: "cat /proc/sys/kernel/random/boot_id".into(),
        }
    }

    /// Runs `remote` on the host over ssh; its stdout when it answered.
    pub fn ssh(&self, remote: &str) -> Option<String> {
        let out = Command::new("ssh")
            .args(["-p", &self.ssh_port.to_string(), "-i"])
            .arg(self.path().join("client_key"))
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=5",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                "root@127.0.0.1",
                remote,
            ])
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Waits until the host answers over ssh; its boot id.
    pub fn wait_up(&self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(id) = self.ssh("cat /proc/sys/kernel/random/boot_id") {
                return id.trim().to_string();
            }
            assert!(
                Instant::now() < deadline,
                "the lab host did not come up within {limit:?}; console:\n{}",
                self.console()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}
