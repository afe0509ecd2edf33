//! The data directory: made (0700) if missing, checked, and held by one process at a
//! time through an exclusive lock on a file in it.
//!
//! The directory is the node's alone: one another user owns, or that its group or
//! others may write, is refused (another local user could have prepared it, with a
//! store or a key of theirs, or could read what the node writes), as is any file of
//! the node's in it that is so. What passes is made private: the directory 0700, the
//! node's files 0600.

use std::{
    fs::{self, File, OpenOptions},
    io,
    path::{Path, PathBuf},
};

/// The store's file, in the data directory.
pub const STORE_FILE: &str = "askgate.db";

/// The lock a serving process holds, in the data directory.
const LOCK_FILE: &str = "askgate.lock";

/// A data directory this process holds: no other askgate process uses it while the
/// lock lives.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    /// Held (locked) for as long as this lives; the OS lets the lock go at exit, even
    /// after kill -9.
    _lock: File,
}

/// The files the node keeps in its data directory (the store's log and shared memory,
/// the lock, the sealing key), checked and made private at start.
const NODE_FILES: [&str; 5] = [
    STORE_FILE,
    "askgate.db-wal",
    "askgate.db-shm",
    LOCK_FILE,
    "secret.key",
];

/// Why a data directory cannot be used: each names it.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Another user owns it, or its group or others may write it.
    #[error(
        "{path} {why}: the data directory and its files must be this user's alone (another \
         user could have prepared them, or could change them); fix it with chown and chmod \
         go-w, or choose another --data-dir"
    )]
    NotPrivate { path: PathBuf, why: String },
    #[error("the data directory {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("cannot use the data directory {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "the data directory {0} is in use by another askgate process (one process per data \
         directory; stop it or choose another --data-dir)"
    )]
    InUse(PathBuf),
}

impl DataDir {
    /// Makes `path` (0700) if it does not exist, checks that it and the node's files
    /// in it are this user's alone and makes them private, and takes its lock.
    pub fn open(path: &Path) -> Result<Self, DirError> {
        let io = |source| DirError::Io {
            path: path.to_owned(),
            source,
        };
        match fs::metadata(path) {
            Ok(meta) if !meta.is_dir() => return Err(DirError::NotADirectory(path.to_owned())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => create_private(path).map_err(io)?,
            Err(e) => return Err(io(e)),
        }
        refuse_shared(path)?;
        make_private(path, 0o700).map_err(io)?;
        for name in NODE_FILES {
            let file = path.join(name);
            if fs::symlink_metadata(&file).is_ok() {
                refuse_shared(&file)?;
                make_private(&file, 0o600).map_err(io)?;
            }
        }
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let lock = options.open(path.join(LOCK_FILE)).map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(DirError::InUse(path.to_owned())),
            Err(fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        Ok(Self {
            path: path.to_owned(),
            _lock: lock,
        })
    }

    /// Whether another askgate process holds `path` now (InUse), checked without
    /// making or changing anything: a second `askgate serve` says so before it tries
    /// the port the first one holds. [`Self::open`] checks again for real.
    pub fn check_free(path: &Path) -> Result<(), DirError> {
        let lock = match OpenOptions::new().write(true).open(path.join(LOCK_FILE)) {
            Ok(lock) => lock,
            // No lock file (a new directory), or one this user may not open: open
            // says what is wrong with it.
            Err(_) => return Ok(()),
        };
        match lock.try_lock() {
            Err(fs::TryLockError::WouldBlock) => Err(DirError::InUse(path.to_owned())),
            _ => Ok(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store's file.
    pub fn store(&self) -> PathBuf {
        self.path.join(STORE_FILE)
    }
}

/// Refuses `path` when another user owns it, or when its group or others may write
/// it: what a node's data directory, store and key files must never be. Root may own
/// it (root can do anything anyway: a key mounted from a Kubernetes Secret is root's).
/// A symbolic link must be owned so too, and so must what it points at.
pub fn refuse_shared(path: &Path) -> Result<(), DirError> {
    let io = |source| DirError::Io {
        path: path.to_owned(),
        source,
    };
    let link = fs::symlink_metadata(path).map_err(io)?;
    if link.file_type().is_symlink() {
        owned_privately(path, &link, false)?;
    }
    owned_privately(path, &fs::metadata(path).map_err(io)?, true)
}

/// Whether `meta` (of `path`) is this user's, and, with `mode`, written by nobody else.
fn owned_privately(path: &Path, meta: &fs::Metadata, mode: bool) -> Result<(), DirError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let refused = |why: String| {
            Err(DirError::NotPrivate {
                path: path.to_owned(),
                why,
            })
        };
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me && meta.uid() != 0 {
            return refused(format!(
                "is owned by user {}, not by this process's user {me} (or root)",
                meta.uid()
            ));
        }
        if mode && meta.mode() & 0o022 != 0 {
            return refused(format!(
                "may be written by its group or others (mode {:o})",
                meta.mode() & 0o777
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, meta, mode);
    Ok(())
}

/// Sets `mode` on `path` (Unix), unless it has it.
fn make_private(path: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let current = fs::metadata(path)?.permissions().mode() & 0o777;
        if current != mode {
            fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Makes the directory (and its parents), readable by its owner only.
fn create_private(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_made_private_and_held_by_one_opener() {
        let scratch = askgate_testing::TempDir::new();
        let dir = scratch.0.join("data");
        let held = DataDir::open(&dir).expect("first open");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&dir).expect("metadata").permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
        let second = DataDir::open(&dir).expect_err("a second opener is refused");
        assert!(matches!(second, DirError::InUse(_)), "{second}");
        assert!(second.to_string().contains(&dir.display().to_string()));
        drop(held);
        DataDir::open(&dir).expect("free again once the first let go");
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_or_file_others_may_write_is_refused_and_the_rest_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        let scratch = askgate_testing::TempDir::new();
        let dir = scratch.0.join("data");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
        let refused = DataDir::open(&dir).expect_err("a world-writable directory");
        assert!(matches!(refused, DirError::NotPrivate { .. }), "{refused}");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        let store = dir.join(STORE_FILE);
        fs::write(&store, b"").expect("an empty store");
        fs::set_permissions(&store, fs::Permissions::from_mode(0o666)).expect("chmod");
        let refused = DataDir::open(&dir).expect_err("a world-writable store");
        assert!(refused.to_string().contains("askgate.db"), "{refused}");
        fs::set_permissions(&store, fs::Permissions::from_mode(0o644)).expect("chmod");
        let held = DataDir::open(&dir).expect("this user's, written by nobody else");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&store), 0o600);
        assert_eq!(mode(&dir.join(LOCK_FILE)), 0o600);
        drop(held);
        std::os::unix::fs::symlink("/tmp", dir.join("secret.key")).expect("symlink");
        assert!(matches!(
            DataDir::open(&dir),
            Err(DirError::NotPrivate { .. })
        ));
    }

    #[test]
    fn a_file_is_not_a_data_directory() {
        let scratch = askgate_testing::TempDir::new();
        let dir = scratch.file("data", b"x");
        let refused = DataDir::open(&dir).expect_err("a file is refused");
        assert!(matches!(refused, DirError::NotADirectory(_)), "{refused}");
    }
}
