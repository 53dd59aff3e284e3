//! The machine description a worker registers with (the report's "test machine" line).

use perfbisect_wire::worker::MachineInfo;
use std::collections::BTreeSet;

pub fn describe() -> MachineInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut model = None;
    let mut threads = 0u32;
    let mut sockets = BTreeSet::new();
    for line in cpuinfo.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => threads += 1,
            "model name" if model.is_none() => model = Some(v.trim().to_string()),
            "physical id" => {
                sockets.insert(v.trim().to_string());
            }
            _ => {}
        }
    }
    let memory_bytes = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let uname = nix::sys::utsname::uname().ok();
    MachineInfo {
        cpu_model: model,
        threads: (threads > 0).then_some(threads),
        sockets: Some(sockets.len().max(1) as u32),
        memory_bytes,
        kernel: uname
            .as_ref()
            .map(|u| u.release().to_string_lossy().into_owned()),
        os: std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            }),
    }
}
