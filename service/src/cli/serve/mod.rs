//! `askgate serve`: flags (and `ASKGATE_*` variables) to [`ServerConfig`], bind, run.

mod args;
mod oidc;
mod parts;
mod port;

use std::process::ExitCode;

use tracing::error;

pub use self::args::{OtlpProtocolArg, ServeArgs};
use super::common::{EXIT_USAGE, shutdown_signal};
use askgate_server::{
    server::{BackendChoice, ServerConfig, run_with_metrics},
    telemetry::{OtlpProtocol, TraceExport},
};

impl ServeArgs {
    /// The trace export these flags ask for (none without --otlp-endpoint).
    pub fn trace_export(&self) -> Option<TraceExport> {
        Some(TraceExport {
            endpoint: self.otlp.otlp_endpoint.clone()?,
            protocol: match self.otlp.otlp_protocol {
                OtlpProtocolArg::Grpc => OtlpProtocol::Grpc,
                OtlpProtocolArg::Http => OtlpProtocol::Http,
            },
            sampling: self.otlp.otlp_sampling,
            backend_calls: self.otlp.otlp_backend_calls,
            instance: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// The server configuration these flags describe; refuses values that cannot work.
    pub fn to_config(&self) -> Result<ServerConfig, String> {
        parts::server_config(self)
    }
}

pub async fn run(args: ServeArgs) -> ExitCode {
    let config = match args.to_config() {
        Ok(config) => config,
        Err(e) => {
            error!("invalid configuration: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // The data directory first: a second `serve` on the same directory learns that
    // (and how to fix it) rather than that the first one holds the port.
    if let BackendChoice::Sqlite { data_dir } = &config.backend
        && let Err(e) = askgate_engines::sqlite::DataDir::check_free(data_dir)
    {
        error!("{e}");
        return ExitCode::FAILURE;
    }
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let port = args.listen.port();
            let held_by = port::holder(port)
                .map(|process| format!(" by {process}"))
                .unwrap_or_default();
            error!(
                listen = %args.listen,
                "port {port} is already in use{held_by}: stop that process, or give this \
                 one another address with --listen (e.g. --listen 127.0.0.1:0 for any free port)"
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            error!(listen = %args.listen, "failed to listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics_listener = match args.metrics.metrics {
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => Some(listener),
            Err(e) => {
                error!(metrics = %addr, "failed to listen for metrics: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    match run_with_metrics(listener, metrics_listener, config, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use askgate_server::domain::Limits;
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        let argv = std::iter::once("serve").chain(args.iter().copied());
        Wrapper::try_parse_from(argv).expect("valid flags").serve
    }

    #[test]
    fn the_switches_help_lists_the_values_it_names() {
        use clap::CommandFactory as _;
        let help = Wrapper::command().render_long_help().to_string();
        for flag in ["--console", "--mcp", "--a2a"] {
            let start = help.find(&format!("{flag} <")).expect(flag);
            let section = &help[start..];
            let end = section.find("\n      --").unwrap_or(section.len());
            let section = &section[..end];
            assert!(section.contains("`on` or `off`"), "{section}");
            assert!(section.contains("[possible values: on, off]"), "{section}");
        }
        for (value, on) in [("on", true), ("off", false), ("true", true), ("0", false)] {
            assert_eq!(parse(&["--a2a", value]).a2a, on, "{value}");
        }
    }

    /// Every default is written once, in the `Default` of the type that owns it: the
    /// flags take theirs from there, so `serve` without flags is the default config,
    /// every part of it.
    #[test]
    fn serve_without_flags_is_the_default_config_in_full() {
        let config = parse(&[]).to_config().expect("defaults are valid");
        assert_eq!(config, ServerConfig::default());
        // And the parts are what the docs say they are.
        assert_eq!(config.limits, Limits::default());
        assert_eq!(config.asks.max_wait, Duration::from_secs(3600));
        assert_eq!(
            config.backend,
            BackendChoice::Sqlite {
                data_dir: "askgate-data".into()
            }
        );
    }

    #[test]
    fn flags_reach_the_config() {
        let config = parse(&["--max-questions", "4", "--max-wait", "90s"])
            .to_config()
            .expect("valid");
        assert_eq!(config.limits.max_questions, 4);
        assert_eq!(config.asks.max_wait, Duration::from_secs(90));
    }

    #[test]
    fn a_default_reminder_schedule_is_held_to_an_asks_rules_in_the_flags_words() {
        let config = parse(&[
            "--notify-remind-after",
            "5m",
            "--notify-escalate-after",
            "1h",
        ])
        .to_config()
        .expect("valid");
        assert_eq!(config.asks.default_notify.remind_after_ms, 300_000);
        assert_eq!(config.asks.default_notify.escalate_after_ms, 3_600_000);
        let err = parse(&["--notify-remind-every", "500ms"])
            .to_config()
            .expect_err("under a second");
        assert_eq!(err, "--notify-remind-every: must be 0 or at least 1s");
        let err = parse(&["--mcp-max-wait", "0s"])
            .to_config()
            .expect_err("zero");
        assert_eq!(err, "--mcp-max-wait must be longer than zero");
    }

    #[test]
    fn no_auth_on_a_public_address_is_refused_with_the_fix() {
        let err = parse(&["--listen", "0.0.0.0:50051"])
            .to_config()
            .expect_err("refused");
        assert!(
            err.contains("--auth keys") && err.contains("--allow-anonymous"),
            "{err}"
        );
        let allowed = parse(&["--listen", "0.0.0.0:50051", "--allow-anonymous"]).to_config();
        assert!(allowed.is_ok());
        assert!(
            parse(&["--auth", "keys"]).to_config().is_err(),
            "keys need a file"
        );
        assert!(
            parse(&["--auth", "jwt"]).to_config().is_err(),
            "jwt needs a key"
        );
    }

    #[test]
    fn impossible_values_are_refused() {
        assert!(parse(&["--max-questions", "0"]).to_config().is_err());
        assert!(parse(&["--max-wait", "0s"]).to_config().is_err());
        assert!(parse(&["--max-wait", "31days"]).to_config().is_err());
    }
}
