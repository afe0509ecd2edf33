//! Each group of `serve` flags to the part of [`ServerConfig`] it fills, refusing
//! values that cannot work (with the flag named).

use std::{net::SocketAddr, time::Duration};

use askgate_proto::v1::NotifyPolicy;
use askgate_server::{
    api::deadline::MAX_WAIT_SECS,
    auth::jwt::KeySource,
    backend::{
        StateConfig,
        hooks::{DEFAULT_MAX_PEOPLE, StoreLimits},
    },
    channels::delivery::WebhookConfig,
    domain::{Limits, validate},
    listener::ConnectionLimits,
    mcp::McpConfig,
    origin::PublicUrl,
    questions::AskRate,
    server::{
        ApprovalConfig, AskConfig, AuthConfig, BackendChoice, ChannelConfig, Http2Limits,
        HttpConfig, McpServing, MetricsAuth, MetricsConfig, RedisConfig, ServerConfig, TlsConfig,
        TransportConfig, WaitPolicy,
    },
    web::CorsOrigins,
};

use super::args::{
    ApprovalArgs, AskArgs, AuthArgs, AuthMode, BackendArgs, BackendKind, ChannelArgs, HttpArgs,
    LimitArgs, McpServeArgs, MetricsArgs, StateArgs, TlsArgs, TransportArgs, WebhookArgs,
};

/// The first of `counts` that is zero, named: they must be at least 1.
fn positive(counts: &[(&str, usize)]) -> Result<(), String> {
    match counts.iter().find(|(_, v)| *v == 0) {
        Some((flag, _)) => Err(format!("{flag} must be at least 1")),
        None => Ok(()),
    }
}

/// The first of `durations` that is zero, named: they must be longer.
fn longer_than_zero(durations: &[(&str, Duration)]) -> Result<(), String> {
    match durations.iter().find(|(_, d)| d.is_zero()) {
        Some((flag, _)) => Err(format!("{flag} must be longer than zero")),
        None => Ok(()),
    }
}

/// Bytes as a count, for [`positive`].
fn bytes(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl LimitArgs {
    pub(super) fn to_config(&self) -> Result<Limits, String> {
        positive(&[
            ("--max-questions", self.max_questions),
            ("--max-options", self.max_options),
            ("--max-label-bytes", self.max_label_bytes),
            ("--max-text-bytes", self.max_text_bytes),
            ("--max-detail-bytes", self.max_detail_bytes),
            ("--max-custom-bytes", self.max_custom_bytes),
        ])?;
        Ok(Limits {
            max_questions: self.max_questions,
            max_options: self.max_options,
            max_label_bytes: self.max_label_bytes,
            max_text_bytes: self.max_text_bytes,
            max_detail_bytes: self.max_detail_bytes,
            max_custom_bytes: self.max_custom_bytes,
            ..Limits::default()
        })
    }
}

impl StateArgs {
    pub(super) fn to_config(&self) -> Result<StateConfig, String> {
        positive(&[
            ("--max-pending-per-session", self.max_pending_per_session),
            ("--subscriber-buffer", self.subscriber_buffer),
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
        ])?;
        Ok(StateConfig {
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
        })
    }
}

impl AskArgs {
    pub(super) fn to_config(&self) -> Result<AskConfig, String> {
        positive(&[("--ask-rate", self.ask_rate as usize)])?;
        longer_than_zero(&[("--agent-heartbeat", self.agent_heartbeat)])?;
        if self.max_wait.is_zero() || self.max_wait.as_secs() > MAX_WAIT_SECS {
            return Err("--max-wait must be longer than zero and at most 30 days".into());
        }
        Ok(AskConfig {
            max_wait: self.max_wait,
            rate: AskRate {
                per_second: self.ask_rate,
                burst: self.ask_burst,
            },
            default_notify: self.default_notify()?,
            agent_heartbeat: self.agent_heartbeat,
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
}

impl TransportArgs {
    pub(super) fn to_config(&self) -> Result<TransportConfig, String> {
        positive(&[
            ("--max-message-bytes", self.max_message_bytes),
            ("--max-connections", self.max_connections),
        ])?;
        longer_than_zero(&[("--idle-timeout", self.idle_timeout)])?;
        Ok(TransportConfig {
            max_message_bytes: self.max_message_bytes,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            http2: Http2Limits {
                max_concurrent_streams: self.http2_max_streams,
                stream_window: self.http2_stream_window,
                connection_window: self.http2_connection_window,
            },
            connections: ConnectionLimits {
                max_connections: self.max_connections,
                idle_timeout: self.idle_timeout,
                ..ConnectionLimits::default()
            },
            drain_timeout: self.drain_timeout,
        })
    }
}

impl HttpArgs {
    pub(super) fn to_config(&self) -> Result<HttpConfig, String> {
        Ok(HttpConfig {
            cors: CorsOrigins::parse(&self.cors_origins)?,
            public_url: self
                .public_url
                .as_deref()
                .map(PublicUrl::parse)
                .transpose()?,
            console: self.console,
            oidc: None,
        })
    }
}

impl McpServeArgs {
    pub(super) fn to_config(&self) -> Result<McpServing, String> {
        positive(&[("--max-mcp-sessions", self.max_mcp_sessions)])?;
        longer_than_zero(&[("--mcp-max-wait", self.mcp_max_wait.unwrap_or(Duration::MAX))])?;
        Ok(McpServing {
            enabled: self.mcp,
            max_sessions: self.max_mcp_sessions,
            tool: McpConfig {
                max_wait: self.mcp_max_wait,
                ..McpConfig::default()
            },
        })
    }
}

impl WebhookArgs {
    pub(super) fn to_config(&self) -> Result<WebhookConfig, String> {
        positive(&[
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
        ])?;
        longer_than_zero(&[
            ("--webhook-retry-initial", self.webhook_retry_initial),
            ("--webhook-retry-max", self.webhook_retry_max),
            ("--webhook-retry-for", self.webhook_retry_for),
            ("--webhook-timeout", self.webhook_timeout),
        ])?;
        if self.webhook_retry_max < self.webhook_retry_initial {
            return Err("--webhook-retry-max must be at least --webhook-retry-initial".into());
        }
        Ok(WebhookConfig {
            allow_private: self.webhook_allow_private,
            retry_initial: self.webhook_retry_initial,
            retry_max: self.webhook_retry_max,
            retry_for: self.webhook_retry_for,
            timeout: self.webhook_timeout,
            limits: StoreLimits {
                max_endpoints: self.webhook_max_endpoints,
                max_queued: self.webhook_max_queued,
                keep_finished: self.webhook_keep,
                max_people: DEFAULT_MAX_PEOPLE,
            },
            concurrency: self.webhook_concurrency,
            per_tenant: self.webhook_concurrency_per_tenant,
            per_endpoint: self.webhook_concurrency_per_endpoint,
            ..WebhookConfig::default()
        })
    }
}

impl ChannelArgs {
    pub(super) fn to_config(&self) -> ChannelConfig {
        ChannelConfig {
            slack_api_url: self.slack_api_url.clone(),
            telegram_api_url: self.telegram_api_url.clone(),
            smtp_url: self.smtp_url.clone(),
            smtp_password_file: self.smtp_password_file.clone(),
            email_from: self.email_from.clone(),
        }
    }
}

impl ApprovalArgs {
    pub(super) fn to_config(&self) -> ApprovalConfig {
        ApprovalConfig {
            secret_key_file: self.secret_key_file.clone(),
            receipt_key_files: self.receipt_key_files.clone(),
            receipt_ttl: self.receipt_ttl,
            audit_retention: self.audit_retention,
        }
    }
}

impl TlsArgs {
    pub(super) fn to_config(&self) -> Option<TlsConfig> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsConfig {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        }
    }
}

impl BackendArgs {
    pub(super) fn to_config(&self) -> Result<BackendChoice, String> {
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
}

impl MetricsArgs {
    pub(super) fn to_config(&self) -> Result<MetricsConfig, String> {
        Ok(MetricsConfig {
            tenant_labels: self.metrics_tenant_labels,
            auth: self.auth()?,
        })
    }

    fn auth(&self) -> Result<MetricsAuth, String> {
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
}

impl AuthArgs {
    /// `listen`: where the node serves (anonymous callers only on loopback, unless
    /// allowed).
    pub(super) fn to_config(&self, listen: SocketAddr) -> Result<AuthConfig, String> {
        match self.auth {
            AuthMode::None => {
                if !listen.ip().is_loopback() && !self.allow_anonymous {
                    return Err(format!(
                        "refusing to serve {} without authentication: use --auth keys \
                         --keys-file FILE or --auth jwt --jwt-secret-file FILE (see \
                         docs/security.md), or add --allow-anonymous to accept anonymous \
                         callers from the network",
                        listen
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
                    &self.jwt_jwks_url,
                ) {
                    (Some(secret), None, None, None) => KeySource::SecretFile(secret.clone()),
                    (None, Some(pem), None, None) => KeySource::PublicKeyFile(pem.clone()),
                    (None, None, Some(jwks), None) => KeySource::JwksFile(jwks.clone()),
                    (None, None, None, Some(url)) => KeySource::JwksUrl(url.clone()),
                    _ => {
                        return Err("--auth jwt needs exactly one of --jwt-secret-file, \
                                    --jwt-public-key-file, --jwt-jwks-file, --jwt-jwks-url"
                            .into());
                    }
                };
                Ok(AuthConfig::Jwt {
                    key,
                    issuer: self.jwt_issuer.clone(),
                    audience: self.jwt_audience.clone(),
                    groups_claim: self.jwt_groups_claim.clone(),
                })
            }
        }
    }
}

/// A whole [`ServerConfig`] from the parts.
pub(super) fn server_config(args: &super::ServeArgs) -> Result<ServerConfig, String> {
    Ok(ServerConfig {
        limits: args.limits.to_config()?,
        settings: args.state.to_config()?,
        asks: args.asks.to_config()?,
        transport: args.transport.to_config()?,
        auth: args.auth.to_config(args.listen)?,
        tls: args.tls.to_config(),
        metrics: args.metrics.to_config()?,
        backend: args.backend.to_config()?,
        http: HttpConfig {
            oidc: args.oidc.to_config()?,
            ..args.http.to_config()?
        },
        mcp: args.mcp.to_config()?,
        a2a: args.a2a,
        webhooks: args.webhooks.to_config()?,
        channels: args.channels.to_config(),
        approvals: args.approvals.to_config(),
    })
}
