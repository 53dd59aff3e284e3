//! Initramfs pieces: a `newc` cpio writer (the format the kernel unpacks), and the release
//! string of a kernel image read from its boot header.
//!
//! The kernel unpacks concatenated archives in order, later files replacing earlier ones,
//! so an initramfs is assembled by appending: the rootfs, the kernel's modules, the job.

use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Writes a `newc` cpio archive.
pub struct CpioWriter<W: Write> {
    out: W,
    written: u64,
    next_ino: u32,
}

impl<W: Write> CpioWriter<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            written: 0,
            next_ino: 1,
        }
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4)) % 4;
        self.out.write_all(&[0u8; 3][..n as usize])?;
        self.written += n;
        Ok(())
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        let ino = self.next_ino;
        self.next_ino += 1;
        let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
        let header = format!(
            "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            0,
            0,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.written += header.len() as u64 + name.len() as u64 + 1;
        self.pad()?;
        self.out.write_all(data)?;
        self.written += data.len() as u64;
        self.pad()
    }

    pub fn dir(&mut self, name: &str) -> io::Result<()> {
        self.entry(name, 0o040755, &[])
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, 0o100000 | (mode & 0o7777), data)
    }

    pub fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        self.entry(name, 0o120777, target.as_bytes())
    }

    /// Adds everything under `root` (directories, files, symlinks) below `prefix`.
    pub fn tree(&mut self, root: &Path, prefix: &str) -> io::Result<()> {
        let mut items: Vec<_> = std::fs::read_dir(root)?.collect::<Result<_, _>>()?;
        items.sort_by_key(|i| i.file_name());
        for item in items {
            let name = format!("{prefix}/{}", item.file_name().to_string_lossy());
            let name = name.trim_start_matches('/').to_string();
            let meta = std::fs::symlink_metadata(item.path())?;
            if meta.is_dir() {
                self.dir(&name)?;
                self.tree(&item.path(), &name)?;
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(item.path())?;
                self.symlink(&name, &target.to_string_lossy())?;
            } else if meta.is_file() {
                self.file(&name, meta.mode(), &std::fs::read(item.path())?)?;
            }
        }
        Ok(())
    }

    /// Writes the trailer and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, &[])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The `kernel_version` string of a bzImage-style kernel image's boot header:
/// "6.1.0-57-amd64 (builder@host) #1 SMP PREEMPT_DYNAMIC ...", the release, who built it
/// where, and `uname -v`.
fn header_string(image: &Path) -> Option<String> {
    let mut head = vec![0u8; 0x8000];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(image).ok()?;
        let mut filled = 0;
        while filled < head.len() {
            match f.read(&mut head[filled..]).ok()? {
                0 => break,
                k => filled += k,
            }
        }
        filled
    };
    let head = &head[..n];
    if head.get(0x202..0x206)? != b"HdrS" {
        return None;
    }
    let offset = u16::from_le_bytes([*head.get(0x20e)?, *head.get(0x20f)?]) as usize;
    if offset == 0 {
        return None;
    }
    let text = head.get(0x200 + offset..)?;
    let end = text.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&text[..end]).ok().map(str::to_string)
}

/// The release (`uname -r`) of a bzImage-style kernel image, from its boot header.
pub fn image_release(image: &Path) -> Option<String> {
    let text = header_string(image)?;
    let release = text.split(' ').next()?;
    (!release.is_empty()).then(|| release.to_string())
}

/// The version (`uname -v`: "#1 SMP PREEMPT_DYNAMIC Mon Nov 30 23:01:02 UTC 2026") of a
/// bzImage-style kernel image: its build number and time, which tell two builds of one
/// release apart.
pub fn image_version(image: &Path) -> Option<String> {
    let text = header_string(image)?;
    let at = text.find(") #")?;
    Some(text[at + 2..].trim().to_string()).filter(|v| !v.is_empty())
}

/// A file that looks enough like a bzImage for [`image_release`]: tests and fakes.
#[doc(hidden)]
pub fn fake_image(release: &str) -> Vec<u8> {
    fake_image_with_version(release, "#1")
}

/// A fake image whose header also names a version (`uname -v`).
#[doc(hidden)]
pub fn fake_image_with_version(release: &str, version: &str) -> Vec<u8> {
    let mut img = vec![0u8; 0x400];
    img[0x202..0x206].copy_from_slice(b"HdrS");
    let offset: u16 = 0x100;
    img[0x20e..0x210].copy_from_slice(&offset.to_le_bytes());
    let at = 0x200 + offset as usize;
    let text = format!("{release} (perfbisect@test) {version}\0");
    img[at..at + text.len()].copy_from_slice(text.as_bytes());
    img
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_entries_are_aligned_and_end_with_a_trailer() {
        let mut w = CpioWriter::new(Vec::new());
        w.dir("perfbisect").unwrap();
        w.file("perfbisect/run", 0o755, b"echo hi\n").unwrap();
        w.symlink("bin/sh", "busybox").unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.starts_with(b"070701"));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("perfbisect/run\0"));
        assert!(text.contains("echo hi\n"));
        assert!(text.contains("TRAILER!!!"));
    }

    #[test]
    fn cpio_is_readable_by_cpio() {
        // The system's cpio is the reference reader, when installed.
        let tmp = tempfile::tempdir().unwrap();
        let mut w = CpioWriter::new(Vec::new());
        w.dir("d").unwrap();
        w.file("d/f", 0o640, b"content").unwrap();
        w.symlink("d/l", "f").unwrap();
        let archive = tmp.path().join("a.cpio");
        std::fs::write(&archive, w.finish().unwrap()).unwrap();
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("cpio -id --quiet < {}", archive.display()))
            .current_dir(&out)
            .status();
        let Ok(status) = status else { return };
        if !status.success() && !Path::new("/usr/bin/cpio").exists() {
            return;
        }
        assert!(status.success());
        assert_eq!(std::fs::read(out.join("d/f")).unwrap(), b"content");
        assert_eq!(std::fs::read_link(out.join("d/l")).unwrap(), Path::new("f"));
    }

    #[test]
    fn release_is_read_from_the_boot_header() {
        let tmp = tempfile::tempdir().unwrap();
        let img = tmp.path().join("bzImage");
        std::fs::write(&img, fake_image("6.1.0-57-amd64")).unwrap();
        assert_eq!(image_release(&img).as_deref(), Some("6.1.0-57-amd64"));
        std::fs::write(
            &img,
            fake_image_with_version("6.1.0-pb1", "#2 SMP PREEMPT_DYNAMIC Mon Nov 30 2026"),
        )
        .unwrap();
        assert_eq!(image_release(&img).as_deref(), Some("6.1.0-pb1"));
        assert_eq!(
            image_version(&img).as_deref(),
            Some("#2 SMP PREEMPT_DYNAMIC Mon Nov 30 2026")
        );
        std::fs::write(&img, b"not a kernel").unwrap();
        assert_eq!(image_release(&img), None);
    }
}
