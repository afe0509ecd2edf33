//! `askgate audit`: the tenant's audit log (docs/approvals.md). `export` writes it as
//! JSON lines, one `{"seq", "prev_hash", "hash", "body"}` object per record, oldest
//! first, then the tenant's signed head taken after them, `{"head": {...}}`; `verify`
//! recomputes every hash and link of such a file, checks that it ends at the head the
//! server signed for the tenant and starts at the chain's first record (or at an
//! anchor kept from an earlier export), and names what breaks.

use std::{
    io::{BufRead, Write},
    path::PathBuf,
    process::ExitCode,
};

use askgate_client::receipt;
use askgate_proto::v1::AuditHead;
use askgate_server::backend::audit::{self, AuditRecord, Head};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use tokio_stream::StreamExt;

use super::common::{ConnectArgs, fail, fail_local};

#[derive(Debug, Clone, Subcommand)]
pub enum AuditCommand {
    /// Print the tenant's audit records as JSON lines, oldest first, then the
    /// tenant's signed head (admin role).
    Export(ExportArgs),
    /// Check an exported file: exit 0 when every record's hash and link verify, the
    /// records end at a head the server signed for the tenant, and start at the
    /// chain's first record or right after --anchor; 1 naming what does not hold, 2
    /// when the file or the keys cannot be read.
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
    /// The server's public keys (the receipt keys): its `/.well-known/jwks.json` URL,
    /// or a file holding that JWK Set. The export's head must be signed by one.
    #[arg(long)]
    pub jwks: String,
    /// The tenant whose log this is: a head of any other tenant is refused.
    #[arg(long)]
    pub tenant: String,
    /// The hash of a head kept from an earlier export: the file's first record must
    /// link to it (for an export `--after` that head's seq, or after older records
    /// were pruned). Without it, the first record must be seq 1.
    #[arg(long)]
    pub anchor: Option<String>,
    /// The file `askgate audit export` wrote (`-` for stdin).
    pub file: PathBuf,
}

/// One record's line of an export.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    seq: u64,
    prev_hash: String,
    hash: String,
    body: String,
}

/// The head's line, an export's last.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadLine {
    head: HeadFields,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadFields {
    tenant: String,
    seq: u64,
    hash: String,
    at: String,
    jws: String,
}

/// A line of an export: a record, or the head.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyLine {
    Head(HeadLine),
    Record(Line),
}

/// Exit code of a chain that does not verify.
const EXIT_BROKEN: u8 = 1;
/// Exit code of a file that cannot be read.
const EXIT_INPUT: u8 = 2;

pub async fn run(command: AuditCommand) -> ExitCode {
    match command {
        AuditCommand::Export(args) => export(args).await,
        AuditCommand::Verify(args) => verify(&args).await,
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
    let mut last = args.after;
    let mut left = match args.limit {
        0 => u64::MAX,
        n => u64::from(n),
    };
    loop {
        while let Some(record) = records.next().await {
            let record = match record {
                Ok(record) => record,
                Err(status) => return fail(&status.into()),
            };
            last = record.seq;
            left -= 1;
            let line = Line {
                seq: record.seq,
                prev_hash: record.prev_hash,
                hash: record.hash,
                body: record.body_json,
            };
            if let Err(e) = write_line(&mut out, &line) {
                return fail_local(format!("writing the export: {e}"), 1);
            }
        }
        let head = match client.audit_head().await {
            Ok(head) => head,
            Err(e) => return fail(&e),
        };
        // Records appended while the export ran: read on up to the head, so that the
        // export ends where the head says (unless --limit cut it short on purpose).
        if head.seq <= last || left == 0 {
            return finish(out, head);
        }
        let more = u32::try_from(left.min(head.seq - last)).unwrap_or(u32::MAX);
        records = match client.export_audit(last, more).await {
            Ok(records) => records,
            Err(e) => return fail(&e),
        };
    }
}

/// Writes the head's line and flushes the export.
fn finish(mut out: impl Write, head: AuditHead) -> ExitCode {
    let line = HeadLine {
        head: HeadFields {
            tenant: head.tenant,
            seq: head.seq,
            hash: head.hash,
            at: head.at,
            jws: head.jws,
        },
    };
    match write_line(&mut out, &line).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail_local(format!("writing the export: {e}"), 1),
    }
}

fn write_line(out: &mut impl Write, line: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
}

async fn verify(args: &VerifyArgs) -> ExitCode {
    let keys = match super::receipt::keys(&args.jwks).await {
        Ok(keys) => keys,
        Err(e) => return fail_local(format!("cannot read the keys: {e}"), EXIT_INPUT),
    };
    let (records, head) = match read_export(&args.file) {
        Ok(read) => read,
        Err((message, code)) => return fail_local(message, code),
    };
    let Some(head) = head else {
        return fail_local(
            "the export has no signed head (its last line, {\"head\": ...}): nothing proves \
             where it ends",
            EXIT_BROKEN,
        );
    };
    if head.jws.is_empty() {
        return fail_local(
            "the export's head is not signed: the server signs heads with its receipt key \
             (--receipt-key-file)",
            EXIT_BROKEN,
        );
    }
    let signed = match receipt::verify_audit_head(&head.jws, &keys, &args.tenant) {
        Ok(signed) => signed,
        Err(e) => return fail_local(format!("the export's head: {e}"), EXIT_BROKEN),
    };
    if (signed.seq, &signed.hash, &signed.tenant) != (head.seq, &head.hash, &head.tenant) {
        return fail_local(
            "the export's head says otherwise than its signature",
            EXIT_BROKEN,
        );
    }
    let end = Head {
        seq: signed.seq,
        hash: signed.hash,
    };
    match audit::verify_export(&records, &end, args.anchor.as_deref()) {
        Ok(count) => {
            let span = match (records.first(), records.last()) {
                (Some(first), Some(last)) => format!(" (seq {} to {})", first.seq, last.seq),
                _ => String::new(),
            };
            eprintln!(
                "askgate: {count} records verify{span}, ending at the head signed for {} at {}",
                args.tenant, signed.at
            );
            ExitCode::SUCCESS
        }
        Err(unproven) => fail_local(unproven, EXIT_BROKEN),
    }
}

/// The records of an export and its head line, which must be the last.
fn read_export(path: &PathBuf) -> Result<(Vec<AuditRecord>, Option<HeadFields>), (String, u8)> {
    let reader: Box<dyn BufRead> = match path.as_os_str() == "-" {
        true => Box::new(std::io::stdin().lock()),
        false => match std::fs::File::open(path) {
            Ok(file) => Box::new(std::io::BufReader::new(file)),
            Err(e) => return Err((format!("{}: {e}", path.display()), EXIT_INPUT)),
        },
    };
    let mut records = Vec::new();
    let mut head = None;
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| (format!("{}: {e}", path.display()), EXIT_INPUT))?;
        if line.trim().is_empty() {
            continue;
        }
        if head.is_some() {
            return Err((
                format!(
                    "line {}: a line after the head (the head must be last)",
                    n + 1
                ),
                EXIT_BROKEN,
            ));
        }
        match serde_json::from_str::<AnyLine>(&line) {
            Ok(AnyLine::Head(line)) => head = Some(line.head),
            Ok(AnyLine::Record(line)) => records.push(AuditRecord {
                seq: line.seq,
                prev_hash: line.prev_hash,
                hash: line.hash,
                body_json: line.body,
            }),
            Err(e) => {
                return Err((
                    format!("line {}: not an audit record or head: {e}", n + 1),
                    EXIT_BROKEN,
                ));
            }
        }
    }
    Ok((records, head))
}
