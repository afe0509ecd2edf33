//! `askgate backup`: an online, consistent copy of a sqlite data directory's store.
//! The node may keep serving meanwhile.

use std::{path::PathBuf, process::ExitCode};

use clap::Args;

use super::common::fail_local;

#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// The data directory of the node to copy (`askgate serve --data-dir`).
    #[arg(long, env = "ASKGATE_DATA_DIR", default_value = "askgate-data")]
    pub data_dir: PathBuf,
    /// The copy: a new file. To restore it, put it in an empty directory as
    /// `askgate.db` and start `askgate serve --data-dir` there.
    #[arg(long)]
    pub out: PathBuf,
}

/// Exit code when the copy could not be made.
const EXIT_FAILED: u8 = 1;

pub async fn run(args: BackupArgs) -> ExitCode {
    let (dir, out) = (args.data_dir.clone(), args.out.clone());
    let copied =
        tokio::task::spawn_blocking(move || askgate_engines::sqlite::backup(&dir, &out)).await;
    match copied {
        Ok(Ok(copied)) => {
            eprintln!(
                "askgate: copied {} to {} ({} bytes)",
                args.data_dir.display(),
                args.out.display(),
                copied.bytes
            );
            let key = args.data_dir.join(askgate_server::server::KEY_FILE);
            if key.exists() {
                eprintln!(
                    "askgate: the copy does not hold the sealing key {}: keep it with the \
                     copy (or run with --secret-key-file)",
                    key.display()
                );
            }
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => fail_local(format!("backup failed: {e:#}"), EXIT_FAILED),
        Err(e) => fail_local(format!("backup failed: {e}"), EXIT_FAILED),
    }
}
