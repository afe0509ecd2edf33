//! `askgate serve`: flags (and `ASKGATE_*` variables) to [`ServerConfig`], bind, run.

mod args;
mod port;

use std::{process::ExitCode, time::Duration};

use tracing::error;

pub use self::args::{AuthMode, BackendKind, OtlpProtocolArg, ServeArgs};
use super::common::{EXIT_USAGE, shutdown_signal};
use askgate_proto::v1::NotifyPolicy;
use askgate_server::{
    api::deadline::MAX_WAIT_SECS,
    auth::jwt::KeySource,
    backend::{StateConfig, hooks::StoreLimits},
    domain::{Limits, validate},
    listener::ConnectionLimits,
    origin::PublicUrl,
    server::{
        AuthConfig, BackendChoice, Http2Limits, MetricsAuth, RedisConfig, ServerConfig, TlsConfig,
        WaitPolicy, run_with_metrics,
    },
    telemetry::{OtlpProtocol, TraceExport},
    web::CorsOrigins,
    webhooks::WebhookConfig,
};

impl ServeArgs {
    /// The trace export these flags ask for (none without --otlp-endpoint).
    pub fn trace_export(&self) -> Option<TraceExport> {
        Some(TraceExport {
            endpoint: self.otlp_endpoint.clone()?,
            protocol: match self.otlp_protocol {
                OtlpProtocolArg::Grpc => OtlpProtocol::Grpc,
                OtlpProtocolArg::Http => OtlpProtocol::Http,
            },
            sampling: self.otlp_sampling,
            backend_calls: self.otlp_backend_calls,
            instance: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// The server configuration these flags describe; refuses values that cannot work.
    pub fn to_config(&self) -> Result<ServerConfig, String> {
        self.check_positive()?;
        self.check_durations()?;
        Ok(ServerConfig {
            settings: self.settings(),
            limits: self.limits(),
            max_wait: self.max_wait,
            drain_timeout: self.drain_timeout,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            connections: ConnectionLimits {
                max_connections: self.max_connections,
                idle_timeout: self.idle_timeout,
                ..ConnectionLimits::default()
            },
            http2: Http2Limits {
                max_concurrent_streams: self.http2_max_streams,
                stream_window: self.http2_stream_window,
                connection_window: self.http2_connection_window,
            },
            max_message_bytes: self.max_message_bytes,
            agent_heartbeat: self.agent_heartbeat,
            auth: self.auth_config()?,
            tls: self.tls(),
            ask_rate: self.ask_rate,
            ask_burst: self.ask_burst,
            metrics_tenant_labels: self.metrics_tenant_labels,
            metrics_auth: self.metrics_auth()?,
            cors: CorsOrigins::parse(&self.cors_origins)?,
            public_url: self
                .public_url
                .as_deref()
                .map(PublicUrl::parse)
                .transpose()?,
            console: self.console,
            mcp: self.mcp,
            a2a: self.a2a,
            max_mcp_sessions: self.max_mcp_sessions,
            mcp_max_wait: self.mcp_max_wait,
            webhooks: self.webhooks(),
            default_notify: self.default_notify()?,
            slack_api_url: self.slack_api_url.clone(),
            telegram_api_url: self.telegram_api_url.clone(),
            smtp_url: self.smtp_url.clone(),
            smtp_password_file: self.smtp_password_file.clone(),
            email_from: self.email_from.clone(),
            secret_key_file: self.secret_key_file.clone(),
            receipt_key_files: self.receipt_key_files.clone(),
            receipt_ttl: self.receipt_ttl,
            audit_retention: self.audit_retention,
            backend: self.backend()?,
        })
    }

    /// Counts and sizes that cannot be zero.
    fn check_positive(&self) -> Result<(), String> {
        let bytes = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let positive = [
            ("--max-questions", self.max_questions),
            ("--max-options", self.max_options),
            ("--max-label-bytes", self.max_label_bytes),
            ("--max-text-bytes", self.max_text_bytes),
            ("--max-detail-bytes", self.max_detail_bytes),
            ("--max-custom-bytes", self.max_custom_bytes),
            ("--max-pending-per-session", self.max_pending_per_session),
            ("--subscriber-buffer", self.subscriber_buffer),
            ("--max-message-bytes", self.max_message_bytes),
            ("--max-pending-per-tenant", self.max_pending_per_tenant),
            (
                "--max-subscribers-per-session",
                self.max_subscribers_per_session,
            ),
            (
                "--max-all-sessions-per-tenant",
                self.max_all_sessions_per_tenant,
            ),
            ("--max-agents-per-tenant", self.max_agents_per_tenant),
            ("--max-sessions-per-tenant", self.max_sessions_per_tenant),
            ("--max-streams-per-tenant", self.max_streams_per_tenant),
            ("--max-mcp-sessions", self.max_mcp_sessions),
            ("--max-connections", self.max_connections),
            (
                "--max-pending-bytes-per-tenant",
                bytes(self.max_pending_bytes_per_tenant),
            ),
            (
                "--max-pending-bytes-per-session",
                bytes(self.max_pending_bytes_per_session),
            ),
            (
                "--max-mcp-sessions-per-tenant",
                self.max_mcp_sessions_per_tenant,
            ),
            ("--ask-rate", self.ask_rate as usize),
            ("--webhook-max-endpoints", self.webhook_max_endpoints),
            ("--webhook-max-queued", self.webhook_max_queued),
            ("--webhook-concurrency", self.webhook_concurrency),
            (
                "--webhook-concurrency-per-tenant",
                self.webhook_concurrency_per_tenant,
            ),
            (
                "--webhook-concurrency-per-endpoint",
                self.webhook_concurrency_per_endpoint,
            ),
        ];
        match positive.iter().find(|(_, v)| *v == 0) {
            Some((flag, _)) => Err(format!("{flag} must be at least 1")),
            None => Ok(()),
        }
    }

    /// Durations that cannot be zero, and those with bounds of their own.
    fn check_durations(&self) -> Result<(), String> {
        let longer_than_zero = [
            ("--idle-timeout", self.idle_timeout),
            ("--agent-heartbeat", self.agent_heartbeat),
            ("--webhook-retry-initial", self.webhook_retry_initial),
            ("--webhook-retry-max", self.webhook_retry_max),
            ("--webhook-retry-for", self.webhook_retry_for),
            ("--webhook-timeout", self.webhook_timeout),
            ("--mcp-max-wait", self.mcp_max_wait.unwrap_or(Duration::MAX)),
        ];
        if let Some((flag, _)) = longer_than_zero.iter().find(|(_, d)| d.is_zero()) {
            return Err(format!("{flag} must be longer than zero"));
        }
        if self.max_wait.is_zero() || self.max_wait.as_secs() > MAX_WAIT_SECS {
            return Err("--max-wait must be longer than zero and at most 30 days".into());
        }
        if self.webhook_retry_max < self.webhook_retry_initial {
            return Err("--webhook-retry-max must be at least --webhook-retry-initial".into());
        }
        Ok(())
    }

    fn limits(&self) -> Limits {
        Limits {
            max_questions: self.max_questions,
            max_options: self.max_options,
            max_label_bytes: self.max_label_bytes,
            max_text_bytes: self.max_text_bytes,
            max_detail_bytes: self.max_detail_bytes,
            max_custom_bytes: self.max_custom_bytes,
            ..Limits::default()
        }
    }

    fn settings(&self) -> StateConfig {
        StateConfig {
            history_len: self.history_len,
            history_bytes: self.history_bytes,
            subscriber_buffer: self.subscriber_buffer,
            max_pending_per_session: self.max_pending_per_session,
            max_pending_per_tenant: self.max_pending_per_tenant,
            max_pending_bytes_per_tenant: self.max_pending_bytes_per_tenant,
            max_pending_bytes_per_session: self.max_pending_bytes_per_session,
            max_subscribers_per_session: self.max_subscribers_per_session,
            max_all_sessions_per_tenant: self.max_all_sessions_per_tenant,
            max_agents_per_tenant: self.max_agents_per_tenant,
            max_sessions_per_tenant: self.max_sessions_per_tenant,
            max_streams_per_tenant: self.max_streams_per_tenant,
            max_mcp_sessions_per_tenant: self.max_mcp_sessions_per_tenant,
            reconnect_grace: self.reconnect_grace,
            request_retention: self.request_retention,
            max_audit_bytes_per_tenant: self.max_audit_bytes_per_tenant,
            ..StateConfig::default()
        }
    }

    fn webhooks(&self) -> WebhookConfig {
        WebhookConfig {
            allow_private: self.webhook_allow_private,
            retry_initial: self.webhook_retry_initial,
            retry_max: self.webhook_retry_max,
            retry_for: self.webhook_retry_for,
            timeout: self.webhook_timeout,
            limits: StoreLimits {
                max_endpoints: self.webhook_max_endpoints,
                max_queued: self.webhook_max_queued,
                keep_finished: self.webhook_keep,
            },
            concurrency: self.webhook_concurrency,
            per_tenant: self.webhook_concurrency_per_tenant,
            per_endpoint: self.webhook_concurrency_per_endpoint,
            ..WebhookConfig::default()
        }
    }

    fn tls(&self) -> Option<TlsConfig> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsConfig {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        }
    }

    fn backend(&self) -> Result<BackendChoice, String> {
        match (self.backend, &self.redis_url) {
            (BackendKind::Sqlite, _) => Ok(BackendChoice::Sqlite {
                data_dir: self.data_dir.clone(),
            }),
            (BackendKind::Memory, _) => Ok(BackendChoice::Memory),
            (BackendKind::Redis, Some(url)) => Ok(BackendChoice::Redis {
                redis: RedisConfig {
                    cluster: self.redis_cluster,
                    sentinel_master: self.redis_sentinel_master.clone(),
                    lease: self.redis_lease,
                    wait: self.redis_wait()?,
                    ..RedisConfig::new(url)
                },
                ca_file: self.redis_ca_file.clone(),
            }),
            (BackendKind::Redis, None) => Err("--backend redis needs --redis-url".into()),
        }
    }

    /// `--redis-wait-*`: what acknowledging writes wait for.
    fn redis_wait(&self) -> Result<WaitPolicy, String> {
        let timeout = self.redis_wait_timeout;
        if timeout < Duration::from_millis(1) || timeout > Duration::from_secs(60) {
            return Err("--redis-wait-timeout must be between 1ms and 60s".into());
        }
        Ok(WaitPolicy {
            replicas: self.redis_wait_replicas,
            fsync: self.redis_wait_fsync,
            timeout,
        })
    }

    /// `--notify-*`: the reminder schedule of asks that set none, held to the rules
    /// of an ask's own (each interval none, 0, or at least a second).
    fn default_notify(&self) -> Result<NotifyPolicy, String> {
        let ms = |flag: &str, d: Duration| {
            let ms = u32::try_from(d.as_millis())
                .map_err(|_| format!("{flag} must be under 49 days"))?;
            match validate::notify_interval_allowed(ms) {
                true => Ok(ms),
                false => Err(format!(
                    "{flag}: must be 0 or at least {}s",
                    validate::MIN_NOTIFY_MS / 1000
                )),
            }
        };
        Ok(NotifyPolicy {
            remind_after_ms: ms("--notify-remind-after", self.notify_remind_after)?,
            remind_every_ms: ms("--notify-remind-every", self.notify_remind_every)?,
            max_reminders: self.notify_max_reminders,
            escalate_after_ms: ms("--notify-escalate-after", self.notify_escalate_after)?,
        })
    }

    fn metrics_auth(&self) -> Result<MetricsAuth, String> {
        match (
            &self.metrics_token_file,
            self.metrics,
            self.metrics_allow_anonymous,
        ) {
            (Some(path), _, _) => Ok(MetricsAuth::Bearer(path.clone())),
            (None, Some(addr), false) if !addr.ip().is_loopback() => Err(format!(
                "refusing to serve metrics on {addr} without authentication: add \
                 --metrics-token-file FILE (scrapers send `authorization: Bearer <token>`), \
                 or --metrics-allow-anonymous if the network admits only the scraper"
            )),
            (None, _, allow_remote) => Ok(MetricsAuth::Anonymous { allow_remote }),
        }
    }

    fn auth_config(&self) -> Result<AuthConfig, String> {
        match self.auth {
            AuthMode::None => {
                if !self.listen.ip().is_loopback() && !self.allow_anonymous {
                    return Err(format!(
                        "refusing to serve {} without authentication: use --auth keys \
                         --keys-file FILE or --auth jwt --jwt-secret-file FILE (see \
                         docs/security.md), or add --allow-anonymous to accept anonymous \
                         callers from the network",
                        self.listen
                    ));
                }
                Ok(AuthConfig::None {
                    allow_anonymous: self.allow_anonymous,
                })
            }
            AuthMode::Keys => self
                .keys_file
                .clone()
                .map(AuthConfig::Keys)
                .ok_or_else(|| "--auth keys needs --keys-file".to_owned()),
            AuthMode::Jwt => {
                let key = match (
                    &self.jwt_secret_file,
                    &self.jwt_public_key_file,
                    &self.jwt_jwks_file,
                ) {
                    (Some(secret), None, None) => KeySource::SecretFile(secret.clone()),
                    (None, Some(pem), None) => KeySource::PublicKeyFile(pem.clone()),
                    (None, None, Some(jwks)) => KeySource::JwksFile(jwks.clone()),
                    _ => {
                        return Err("--auth jwt needs exactly one of --jwt-secret-file, \
                                    --jwt-public-key-file, --jwt-jwks-file"
                            .into());
                    }
                };
                Ok(AuthConfig::Jwt {
                    key,
                    issuer: self.jwt_issuer.clone(),
                    audience: self.jwt_audience.clone(),
                })
            }
        }
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
    let metrics_listener = match args.metrics {
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

    #[test]
    fn defaults_make_a_sane_config() {
        let config = parse(&[]).to_config().expect("defaults are valid");
        assert_eq!(config.limits, Limits::default());
        assert_eq!(config.max_wait, Duration::from_secs(3600));
    }

    #[test]
    fn flags_reach_the_config() {
        let config = parse(&["--max-questions", "4", "--max-wait", "90s"])
            .to_config()
            .expect("valid");
        assert_eq!(config.limits.max_questions, 4);
        assert_eq!(config.max_wait, Duration::from_secs(90));
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
        assert_eq!(config.default_notify.remind_after_ms, 300_000);
        assert_eq!(config.default_notify.escalate_after_ms, 3_600_000);
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
