//! The data directory: made (0700) if missing, checked, and held by one process at a
//! time through an exclusive lock on a file in it.

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

/// Why a data directory cannot be used: each names it.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
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
    /// Makes `path` (0700) if it does not exist, and takes its lock.
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
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path.join(LOCK_FILE))
            .map_err(io)?;
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

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store's file.
    pub fn store(&self) -> PathBuf {
        self.path.join(STORE_FILE)
    }
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

    #[test]
    fn a_file_is_not_a_data_directory() {
        let scratch = askgate_testing::TempDir::new();
        let dir = scratch.file("data", b"x");
        let refused = DataDir::open(&dir).expect_err("a file is refused");
        assert!(matches!(refused, DirError::NotADirectory(_)), "{refused}");
    }
}
