//! `askgate audit`: the tenant's audit log (docs/approvals.md). `export` writes it as
//! JSON lines, one `{"seq", "prev_hash", "hash", "body"}` object per record, oldest
//! first; `verify` recomputes every hash and link of such a file and names the first
//! record that breaks the chain.

use std::{
    io::{BufRead, Write},
    path::PathBuf,
    process::ExitCode,
};

use askgate_server::backend::audit::{self, AuditRecord};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use tokio_stream::StreamExt;

use super::common::{ConnectArgs, fail, fail_local};

#[derive(Debug, Clone, Subcommand)]
pub enum AuditCommand {
    /// Print the tenant's audit records as JSON lines, oldest first (admin role).
    Export(ExportArgs),
    /// Check an exported file: exit 0 when every record's hash and link verify, 1
    /// naming the first record that does not, 2 when the file cannot be read.
    Verify(VerifyArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Only records after this seq.
    #[arg(long, default_value_t = 0)]
    pub after: u64,
    /// At most this many records (0: all).
    #[arg(long, default_value_t = 0)]
    pub limit: u32,
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The file `askgate audit export` wrote (`-` for stdin).
    pub file: PathBuf,
}

/// One line of an export.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    seq: u64,
    prev_hash: String,
    hash: String,
    body: String,
}

/// Exit code of a chain that does not verify.
const EXIT_BROKEN: u8 = 1;
/// Exit code of a file that cannot be read.
const EXIT_INPUT: u8 = 2;

pub async fn run(command: AuditCommand) -> ExitCode {
    match command {
        AuditCommand::Export(args) => export(args).await,
        AuditCommand::Verify(args) => verify(&args.file),
    }
}

async fn export(args: ExportArgs) -> ExitCode {
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let mut records = match client.export_audit(args.after, args.limit).await {
        Ok(records) => records,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    while let Some(record) = records.next().await {
        let record = match record {
            Ok(record) => record,
            Err(status) => return fail(&status.into()),
        };
        let line = Line {
            seq: record.seq,
            prev_hash: record.prev_hash,
            hash: record.hash,
            body: record.body_json,
        };
        let written = serde_json::to_writer(&mut out, &line)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"));
        if let Err(e) = written {
            return fail_local(format!("writing the export: {e}"), 1);
        }
    }
    match out.flush() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail_local(format!("writing the export: {e}"), 1),
    }
}

fn verify(path: &PathBuf) -> ExitCode {
    let reader: Box<dyn BufRead> = match path.as_os_str() == "-" {
        true => Box::new(std::io::stdin().lock()),
        false => match std::fs::File::open(path) {
            Ok(file) => Box::new(std::io::BufReader::new(file)),
            Err(e) => return fail_local(format!("{}: {e}", path.display()), EXIT_INPUT),
        },
    };
    let mut records = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = match line {
            Ok(line) => line,
            Err(e) => return fail_local(format!("{}: {e}", path.display()), EXIT_INPUT),
        };
        if line.trim().is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_str(&line) {
            Ok(line) => line,
            Err(e) => {
                return fail_local(
                    format!("line {}: not an audit record: {e}", n + 1),
                    EXIT_BROKEN,
                );
            }
        };
        records.push(AuditRecord {
            seq: line.seq,
            prev_hash: line.prev_hash,
            hash: line.hash,
            body_json: line.body,
        });
    }
    match audit::verify(&records) {
        Ok(count) => {
            let span = match (records.first(), records.last()) {
                (Some(first), Some(last)) => format!(" (seq {} to {})", first.seq, last.seq),
                _ => String::new(),
            };
            eprintln!("askgate: {count} records verify{span}");
            ExitCode::SUCCESS
        }
        Err(broken) => fail_local(
            format!("the chain breaks at seq {}: {}", broken.seq, broken.what),
            EXIT_BROKEN,
        ),
    }
}
