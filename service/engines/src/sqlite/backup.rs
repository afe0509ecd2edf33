//! `askgate backup`: an online, consistent copy of a data directory's store, made with
//! SQLite's backup API while the node keeps serving (or while it is stopped), readable
//! by its owner only (0600).

use std::{
    fs,
    path::{Path, PathBuf},
};

use rusqlite::{Connection, OpenFlags, backup::Backup};

use super::dir::STORE_FILE;

/// What a backup copied.
#[derive(Debug)]
pub struct Copied {
    /// Pages of the store copied (of its page size).
    pub pages: u64,
    /// The copy's size in bytes.
    pub bytes: u64,
}

/// Copies the store of the data directory `dir` to `out`, a new file: the store as
/// one committed transaction left it. `out` is written beside itself first and renamed
/// into place once complete and synced, so it never holds half a copy.
pub fn backup(dir: &Path, out: &Path) -> anyhow::Result<Copied> {
    let store = dir.join(STORE_FILE);
    anyhow::ensure!(
        store.is_file(),
        "{} holds no askgate store ({STORE_FILE})",
        dir.display()
    );
    anyhow::ensure!(
        !out.exists(),
        "{} exists: remove it or choose another --out",
        out.display()
    );
    // Read-write without create: reading a WAL store needs its shared memory, and
    // nothing is written through this connection.
    let source = Connection::open_with_flags(
        &store,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    source.busy_timeout(std::time::Duration::from_secs(10))?;
    let partial = partial_path(out);
    let _ = fs::remove_file(&partial);
    let copied = copy(&source, &partial);
    if copied.is_err() {
        let _ = fs::remove_file(&partial);
    }
    let pages = copied?;
    fs::File::open(&partial)?.sync_all()?;
    fs::rename(&partial, out)?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        // The rename itself is durable once the directory is.
        fs::File::open(parent)?.sync_all()?;
    }
    Ok(Copied {
        pages,
        bytes: fs::metadata(out)?.len(),
    })
}

/// Every page in one step: one read transaction, so the copy is one consistent state
/// however busy the writer is (a copy in several steps restarts whenever the writer
/// commits).
fn copy(source: &Connection, to: &Path) -> anyhow::Result<u64> {
    // The copy holds every answer and sealed secret: readable by its owner only, from
    // its first byte.
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    drop(options.open(to)?);
    let mut target = Connection::open(to)?;
    {
        let backup = Backup::new(source, &mut target)?;
        backup.step(-1)?;
        let progress = backup.progress();
        anyhow::ensure!(progress.remaining == 0, "the copy is incomplete");
    }
    // A copy stands alone: no write-ahead log beside it.
    target.pragma_update(None, "journal_mode", "DELETE")?;
    let pages: i64 = target.pragma_query_value(None, "page_count", |row| row.get(0))?;
    Ok(pages as u64)
}

fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}
