//! Small real filesystems for the disk rows: a tmpfs of a given size, remounted read-only or
//! read-write on demand, unmounted when dropped; and a filler file that takes every free
//! byte of one until it is removed. Mounting needs root: without it these panic saying so.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Fails the test unless it runs as root.
pub fn require_root(why: &str) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root to {why}: run the tests as root (CI does)"
    );
}

/// Runs `mount` or `umount` with `args`: its error output if it fails.
fn mount_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} (install util-linux's mount): {e}"));
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{tool} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A tmpfs of its own at a fresh directory; unmounted when dropped (drop what uses it
/// first: the claimd serving from it, the filler).
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `16m`).
    pub fn mount(size: &str) -> Tmpfs {
        require_root("mount a tmpfs");
        // Somewhere to mount it: a test cannot run without a temporary directory.
        let dir = tempfile::tempdir().expect("a mount point");
        let path = dir.path().to_str().expect("a UTF-8 temporary path");
        let options = format!("size={size},mode=0700");
        if let Err(e) = mount_tool("mount", &["-t", "tmpfs", "-o", &options, "tmpfs", path]) {
            panic!("cannot mount a tmpfs: {e}");
        }
        Tmpfs { dir }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `mount -o remount,<how>` (`ro`, `rw`): the error output if the kernel refuses.
    pub fn remount(&self, how: &str) -> Result<(), String> {
        let path = self.path().to_str().expect("a UTF-8 temporary path");
        mount_tool("mount", &["-o", &format!("remount,{how}"), path])
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let path = self.path().to_string_lossy().into_owned();
        // Busy only if something still uses it: detach it then, it goes when they do.
        if mount_tool("umount", &[&path]).is_err() {
            let _ = mount_tool("umount", &["--lazy", &path]);
        }
    }
}

/// A file that took every free byte of its filesystem; removed when dropped, which gives the
/// space back.
pub struct Filler {
    path: PathBuf,
    /// How many bytes it took.
    pub bytes: u64,
}

impl Filler {
    /// Writes `path` until its filesystem is full: chunks of 1 MiB, then smaller ones down to
    /// a single byte, each until the kernel answers ENOSPC.
    pub fn fill(path: &Path) -> Filler {
        let mut file = File::create(path).expect("the filler file");
        let mut bytes = 0;
        for chunk in [1 << 20, 1 << 16, 1 << 12, 1] {
            let zeros = vec![0_u8; chunk];
            loop {
                match file.write(&zeros) {
                    Ok(0) => break,
                    Ok(n) => bytes += n as u64,
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => panic!("the filler failed otherwise than with ENOSPC: {e}"),
                }
            }
        }
        Filler {
            path: path.to_owned(),
            bytes,
        }
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Runs `tool` with `args`, failing the test (saying what to install) if it cannot run or
/// fails: its standard output.
fn run(tool: &str, package: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} (install {package}): {e}"));
    assert!(
        out.status.success(),
        "{tool} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// An ext4 filesystem in an image file on a loop device, mounted `errors=remount-ro`: the
/// kernel takes it read-only when it meets an error, as it would a failing disk. Unmounted
/// and detached when dropped (drop the claimd serving from it first).
pub struct Ext4 {
    mount: tempfile::TempDir,
    device: String,
    _image: tempfile::TempDir,
}

impl Ext4 {
    /// Makes a `mib` MiB image, attaches it to a free loop device and mounts it.
    pub fn mount(mib: u64) -> Ext4 {
        require_root("attach a loop device and mount ext4 on it");
        // Somewhere for the image and the mount point: tests run with a temporary directory.
        let image_dir = tempfile::tempdir().expect("a directory for the image");
        let image = image_dir.path().join("ext4.img");
        let file = File::create(&image).expect("the image file");
        file.set_len(mib << 20).expect("the image's size");
        let image = image.to_str().expect("a UTF-8 temporary path").to_owned();
        run("mkfs.ext4", "e2fsprogs", &["-q", "-F", &image]);
        let device = run("losetup", "util-linux", &["--find", "--show", &image]);
        let ext4 = Ext4 {
            mount: tempfile::tempdir().expect("a mount point"),
            device,
            _image: image_dir,
        };
        ext4.mount_again();
        ext4
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.mount.path()
    }

    fn mount_again(&self) {
        let path = self.path().to_str().expect("a UTF-8 temporary path");
        let options = "errors=remount-ro";
        run(
            "mount",
            "util-linux",
            &["-t", "ext4", "-o", options, &self.device, path],
        );
    }

    /// `mount -o remount,ro`: the error output if the kernel refuses.
    pub fn remount_read_only(&self) -> Result<(), String> {
        let path = self.path().to_str().expect("a UTF-8 temporary path");
        mount_tool("mount", &["-o", "remount,ro", path])
    }

    /// Has the kernel record a filesystem error (`trigger_fs_error`, made for testing), which
    /// under `errors=remount-ro` takes the filesystem read-only at once.
    pub fn fail(&self) {
        let name = self.device.trim_start_matches("/dev/");
        let knob = format!("/sys/fs/ext4/{name}/trigger_fs_error");
        std::fs::write(&knob, "claimd test\n").unwrap_or_else(|e| panic!("{knob}: {e}"));
    }

    /// What an operator does once the disk is fine: unmount (nothing may use it), `e2fsck`
    /// and mount it again.
    pub fn repair(&self) {
        let path = self.path().to_str().expect("a UTF-8 temporary path");
        if let Err(e) = mount_tool("umount", &[path]) {
            panic!("cannot unmount the failed filesystem: {e}");
        }
        // e2fsck exits 1 when it corrected something (the error the test recorded).
        let checked = Command::new("e2fsck")
            .args(["-f", "-y", &self.device])
            .output()
            .unwrap_or_else(|e| panic!("cannot run e2fsck (install e2fsprogs): {e}"));
        assert!(
            matches!(checked.status.code(), Some(0 | 1)),
            "e2fsck: {}",
            String::from_utf8_lossy(&checked.stdout)
        );
        self.mount_again();
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let path = self.path().to_string_lossy().into_owned();
        if mount_tool("umount", &[&path]).is_err() {
            let _ = mount_tool("umount", &["--lazy", &path]);
        }
        let _ = mount_tool("losetup", &["--detach", &self.device]);
    }
}
