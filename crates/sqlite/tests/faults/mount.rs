//! File systems the fault tests mount for themselves, each under its own temporary
//! directory and unmounted on drop: a size-capped tmpfs (a disk that fills up) and an ext4
//! image on a loop device (a file system the kernel turns read-only after an error).
//!
//! Mounting needs root (CAP_SYS_ADMIN); without it the tests fail saying so, never skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// Runs a command that must succeed, or panics with what it said and what the test needs.
fn run(cmd: &mut Command, needs: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?} ({e}); {needs}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}; {needs}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const ROOT: &str = "this test mounts a file system of its own: run it as root (or with CAP_SYS_ADMIN) on Linux, with util-linux's mount";

/// A mounted file system; unmounted (lazily if still busy) when dropped.
struct Mounted {
    point: PathBuf,
    /// Whether it is mounted now.
    up: bool,
    /// Holds the mount point and whatever backs it; removed after the unmount.
    _dir: TempDir,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if !self.up {
            return;
        }
        let ok = Command::new("umount")
            .arg(&self.point)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds a file open (a test that failed early): detach it now,
            // the kernel frees it when the last file closes.
            let _ = Command::new("umount").arg("-l").arg(&self.point).status();
        }
    }
}

/// A tmpfs of a fixed size: writes past it fail with ENOSPC, as on a full disk.
pub struct Tmpfs(Mounted);

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` on a new temporary directory.
    pub fn mount(bytes: u64) -> Tmpfs {
        let dir = tempfile::tempdir().expect("temp dir");
        let point = dir.path().join("mnt");
        std::fs::create_dir(&point).expect("mount point");
        run(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={bytes},mode=0755"))
                .arg("tmpfs")
                .arg(&point),
            ROOT,
        );
        Tmpfs(Mounted {
            point,
            up: true,
            _dir: dir,
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.0.point
    }

    /// Grows (or shrinks) it in place, files open or not.
    pub fn resize(&self, bytes: u64) {
        run(
            Command::new("mount")
                .arg("-o")
                .arg(format!("remount,size={bytes}"))
                .arg(&self.0.point),
            ROOT,
        );
    }
}

/// An ext4 file system in an image file on a loop device, mounted with
/// `errors=remount-ro`: after an error the kernel makes it read-only under the open files,
/// as it does to a real disk that failed. It stays read-only until unmounted.
pub struct Ext4 {
    mounted: Mounted,
    image: PathBuf,
}

const EXT4: &str = "this test mounts an ext4 image on a loop device: run it as root on Linux with loop devices, util-linux's mount and e2fsprogs (mkfs.ext4, e2fsck; Debian: apt-get install e2fsprogs)";

impl Ext4 {
    /// Makes a `bytes` ext4 image in a new temporary directory and mounts it.
    pub fn mount(bytes: u64) -> Ext4 {
        let dir = tempfile::tempdir().expect("temp dir");
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(bytes))
            .expect("image file");
        run(
            Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image),
            EXT4,
        );
        let point = dir.path().join("mnt");
        std::fs::create_dir(&point).expect("mount point");
        let mut fs = Ext4 {
            mounted: Mounted {
                point,
                up: false,
                _dir: dir,
            },
            image,
        };
        fs.attach();
        fs.mounted.up = true;
        fs
    }

    fn attach(&self) {
        run(
            Command::new("mount")
                .args(["-o", "loop,errors=remount-ro"])
                .arg(&self.image)
                .arg(&self.mounted.point),
            EXT4,
        );
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.mounted.point
    }

    /// Reports a file-system error to the kernel (ext4's `trigger_fs_error`), which then
    /// aborts the journal and remounts the file system read-only, files open or not.
    pub fn fail_read_only(&self) {
        let out = Command::new("findmnt")
            .args(["-no", "SOURCE"])
            .arg(self.path())
            .output()
            .expect("findmnt (util-linux)");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let name = dev.rsplit('/').next().unwrap_or_default().to_string();
        let knob = format!("/sys/fs/ext4/{name}/trigger_fs_error");
        std::fs::write(&knob, "delayq fault test")
            .unwrap_or_else(|e| panic!("cannot write {knob} ({e}); {EXT4}"));
    }

    /// Whether a `mount -o remount,rw` brings it back (the kernel refuses it after an
    /// error remount: the journal was aborted).
    pub fn try_remount_rw(&self) -> bool {
        Command::new("mount")
            .args(["-o", "remount,rw"])
            .arg(self.path())
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Unmounts it, repairs it as a boot would (`e2fsck -fy`: replays the journal) and
    /// mounts it again on the same path. Every file on it must be closed.
    pub fn repair_and_remount(&mut self) {
        run(Command::new("umount").arg(&self.mounted.point), EXT4);
        self.mounted.up = false;
        // e2fsck exits 1 when it fixed something: that is success here.
        let out = Command::new("e2fsck")
            .args(["-f", "-y"])
            .arg(&self.image)
            .output()
            .unwrap_or_else(|e| panic!("cannot run e2fsck ({e}); {EXT4}"));
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "e2fsck failed: {out:?}"
        );
        self.attach();
        self.mounted.up = true;
    }
}
