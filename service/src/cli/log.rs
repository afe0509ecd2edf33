//! The log, and the traces beside it.
//!
//! The log's field formatter cuts every value a log line holds at
//! [`MAX_LOGGED_VALUE_BYTES`], whoever logs it (askgate, rmcp, hyper). Much of what is
//! logged comes from callers (an MCP client's `clientInfo`, a notification's params,
//! a cancel reason): without the cut, one request could write megabytes of log.

use std::{
    fmt::{self, Write as _},
    io::IsTerminal,
};

use anyhow::Context as _;
use askgate_server::telemetry::{self, TraceExport, Traces};
use tracing::field::{Field, Visit};
use tracing_subscriber::{
    EnvFilter, Layer,
    field::RecordFields,
    fmt::{FormatFields, format::Writer},
    layer::SubscriberExt,
    util::SubscriberInitExt,
};

/// Installs the log (to stderr, filtered by `filter`, a `--log` directive list) and,
/// with `export`, the OTLP trace exporter: call within the runtime the exporter's
/// connections are to live on.
pub fn init(filter: &str, export: Option<&TraceExport>) -> anyhow::Result<Option<Traces>> {
    // rmcp logs several INFO lines per MCP session, one a Debug dump of the client's
    // parameters: they are for debugging, unless the filter names rmcp itself. The
    // spans askgate exports as traces are not log lines, unless the filter names them.
    let mut filter = filter.to_owned();
    if !filter.contains("rmcp") {
        filter.push_str(",rmcp=warn");
    }
    if !filter.contains(telemetry::TARGET) {
        filter = format!("{filter},{}=off", telemetry::TARGET);
    }
    let filter =
        EnvFilter::try_new(&filter).with_context(|| format!("invalid --log filter {filter:?}"))?;
    let traces = export.map(Traces::start).transpose()?;
    let log = tracing_subscriber::fmt::layer()
        .fmt_fields(BoundedFields)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    // No layer in place of the exporter when there is none: an absent `Option` layer
    // takes an interest in every callsite, so every span (askgate's traced spans,
    // the per-call debug spans) would be built on every call and never read.
    let subscriber = tracing_subscriber::registry().with(log);
    match &traces {
        Some(traces) => subscriber.with(traces.layer()).init(),
        None => subscriber.init(),
    }
    Ok(traces)
}

/// Longest value (or message) one log field shows; the rest is left out and `…` marks
/// the cut.
pub const MAX_LOGGED_VALUE_BYTES: usize = 1024;

/// `field=value` pairs as the default formatter writes them, each value cut.
#[derive(Debug, Default, Clone, Copy)]
pub struct BoundedFields;

impl<'writer> FormatFields<'writer> for BoundedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = BoundedVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct BoundedVisitor<'writer> {
    writer: Writer<'writer>,
    first: bool,
    result: fmt::Result,
}

impl Visit for BoundedVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.record_debug(field, &format_args!("{value}")),
            _ => self.record_debug(field, &value),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let mut shown = Capped::default();
        // An error here is the cap: formatting stopped there.
        let _ = write!(shown, "{value:?}");
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = match field.name() {
            "message" => write!(self.writer, "{separator}{}", shown.text),
            name => write!(
                self.writer,
                "{separator}{}={}",
                name.strip_prefix("r#").unwrap_or(name),
                shown.text
            ),
        };
    }
}

/// A string that takes at most [`MAX_LOGGED_VALUE_BYTES`], then refuses more (so a
/// huge value is not even formatted whole) and ends with `…`.
#[derive(Default)]
struct Capped {
    text: String,
    cut: bool,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.cut {
            return Err(fmt::Error);
        }
        let left = MAX_LOGGED_VALUE_BYTES - self.text.len();
        if s.len() <= left {
            self.text.push_str(s);
            return Ok(());
        }
        let mut end = left;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        self.text.push('…');
        self.cut = true;
        Err(fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[derive(Debug)]
    #[allow(dead_code)]
    struct ClientInfo {
        name: String,
    }

    #[test]
    fn a_huge_value_is_cut_wherever_it_is_logged() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(BoundedFields)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let huge = "é".repeat(3 * 1024 * 1024 / 2);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("call", session = %huge);
            let _entered = span.enter();
            let peer_info = ClientInfo { name: huge.clone() };
            tracing::info!(?peer_info, reason = huge.as_str(), "initialized {}", huge);
            tracing::info!(small = 7, "ok");
        });
        let log = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf-8");
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2, "{log}");
        // Four values (span field, message, two fields), each cut.
        assert!(
            lines[0].len() < 5 * (MAX_LOGGED_VALUE_BYTES + 64),
            "{}",
            lines[0].len()
        );
        assert_eq!(lines[0].matches('…').count(), 4, "{}", lines[0]);
        assert!(lines[1].ends_with("ok small=7"), "{}", lines[1]);
    }
}
