//! `askgate serve`'s flags (each also an `ASKGATE_*` variable), their defaults taken
//! from the config types that own them.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use askgate_server::{
    auth::jwt::DEFAULT_GROUPS_CLAIM,
    backend::StateConfig,
    channels::delivery::WebhookConfig,
    domain::Limits,
    server::{
        ApprovalConfig, AskConfig, DEFAULT_DATA_DIR, HttpConfig, McpServing, RedisConfig,
        ServerConfig, TransportConfig, WaitPolicy,
    },
};
use clap::{Args, ValueEnum};

use crate::cli::common::{on_off, parse_duration, span};

/// A default in milliseconds, as a flag's duration.
fn ms_span(ms: u32) -> String {
    span(Duration::from_millis(ms.into()))
}

/// A default switch, as the flag writes it.
fn switch(on: bool) -> &'static str {
    match on {
        true => "on",
        false => "off",
    }
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// One node; what it acknowledged survives a crash (in --data-dir).
    Sqlite,
    /// One node; nothing kept across a restart (tests, benchmarks).
    Memory,
    /// Several nodes sharing one Redis.
    Redis,
}

/// `--auth`: how callers authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// Anonymous callers (loopback only, unless --allow-anonymous).
    None,
    /// API keys from --keys-file.
    Keys,
    /// JWT bearer tokens verified with --jwt-secret-file, --jwt-public-key-file,
    /// --jwt-jwks-file or --jwt-jwks-url.
    Jwt,
}

/// `--otlp-protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OtlpProtocolArg {
    /// OTLP/gRPC (a collector's port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (port 4318).
    Http,
}

/// `askgate serve`'s flags: a few of its own, and a group per part of [`ServerConfig`],
/// each taking its defaults from the `Default` of the type it fills.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// A TOML file of settings named like these flags without the dashes
    /// (`listen = "0.0.0.0:50051"`); flags and ASKGATE_* variables override it.
    #[arg(long, env = "ASKGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "ASKGATE_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    /// Serve the A2A protocol (`on` or `off`): askgate as the A2A agent "a human", its
    /// gRPC service on this port and its card at /.well-known/agent-card.json
    /// (docs/a2a.md); agent credentials as for gRPC.
    #[arg(long, env = "ASKGATE_A2A", default_value = switch(ServerConfig::default().a2a), action = clap::ArgAction::Set,
          value_parser = on_off())]
    pub a2a: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub auth: AuthArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub otlp: OtlpArgs,
    #[command(flatten)]
    pub asks: AskArgs,
    #[command(flatten)]
    pub state: StateArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub oidc: super::oidc::OidcArgs,
    #[command(flatten)]
    pub mcp: McpServeArgs,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    #[command(flatten)]
    pub channels: ChannelArgs,
    #[command(flatten)]
    pub approvals: ApprovalArgs,
}

/// Where state lives (`--backend`, `--data-dir`, `--redis-*`): [`BackendChoice`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Storage")]
pub struct BackendArgs {
    /// Where state lives: `sqlite` (this node, on disk in --data-dir), `memory` (this
    /// process, gone at a restart) or `redis` (shared by several nodes).
    #[arg(long, env = "ASKGATE_BACKEND", value_enum, default_value = "sqlite")]
    pub backend: BackendKind,
    /// With --backend sqlite: the data directory (made 0700 if missing), held by one
    /// askgate process at a time.
    #[arg(long, env = "ASKGATE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Redis URL for --backend redis (`redis://host:6379/0`, `rediss://` for TLS); with
    /// --redis-cluster, the comma-separated URLs of some of the cluster's nodes.
    #[arg(long, env = "ASKGATE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// --redis-url names a Redis Cluster (7 or newer): keys are spread over its shards
    /// by session, and events go through sharded pub/sub.
    #[arg(long, env = "ASKGATE_REDIS_CLUSTER")]
    pub redis_cluster: bool,
    /// With --backend redis: how long this node's leases last without renewal (a dead
    /// node's waiting asks are aborted that long, plus their reattach grace, after).
    #[arg(long, env = "ASKGATE_REDIS_LEASE", default_value = span(RedisConfig::DEFAULT_LEASE), value_parser = parse_duration)]
    pub redis_lease: Duration,
    /// --redis-url names Redis Sentinels (comma-separated), which watch the primary of
    /// this name: the nodes find it through them and follow its failovers.
    #[arg(
        long,
        env = "ASKGATE_REDIS_SENTINEL_MASTER",
        conflicts_with = "redis_cluster"
    )]
    pub redis_sentinel_master: Option<String>,
    /// Every write that acknowledges something (an ask, an answer, an attach, an
    /// endpoint change, a delivery's outcome) waits until this many replicas hold it
    /// (Redis WAIT), so that a failover cannot lose it. 0: no waiting.
    #[arg(long, env = "ASKGATE_REDIS_WAIT_REPLICAS", default_value_t = WaitPolicy::default().replicas)]
    pub redis_wait_replicas: u32,
    /// Acknowledging writes also wait until the primary's append-only file (and the
    /// replicas' of --redis-wait-replicas) is fsynced (Redis WAITAOF: Redis 7.2 or
    /// newer, with `appendonly yes`).
    #[arg(long, env = "ASKGATE_REDIS_WAIT_FSYNC")]
    pub redis_wait_fsync: bool,
    /// The longest an acknowledging write waits for --redis-wait-replicas or
    /// --redis-wait-fsync; past it the call fails UNAVAILABLE (the write may or may not
    /// survive a failover; retrying is safe).
    #[arg(long, env = "ASKGATE_REDIS_WAIT_TIMEOUT", default_value = span(WaitPolicy::DEFAULT_TIMEOUT), value_parser = parse_duration)]
    pub redis_wait_timeout: Duration,
    /// With a `rediss://` URL: a CA certificate (PEM) to trust for Redis besides the
    /// system's roots.
    #[arg(long, env = "ASKGATE_REDIS_CA_FILE")]
    pub redis_ca_file: Option<PathBuf>,
}

/// How callers authenticate (`--auth`, `--keys-file`, `--jwt-*`): [`AuthConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Authentication")]
pub struct AuthArgs {
    /// How callers authenticate.
    #[arg(long, env = "ASKGATE_AUTH", value_enum, default_value = "none")]
    pub auth: AuthMode,
    /// With --auth none on a non-loopback address: accept anonymous callers anyway.
    #[arg(long, env = "ASKGATE_ALLOW_ANONYMOUS")]
    pub allow_anonymous: bool,
    /// The keys file for --auth keys (see `askgate keys add`); re-read on SIGHUP.
    #[arg(long, env = "ASKGATE_KEYS_FILE")]
    pub keys_file: Option<PathBuf>,
    /// HS256 secret (at least 32 bytes) for --auth jwt.
    #[arg(long, env = "ASKGATE_JWT_SECRET_FILE")]
    pub jwt_secret_file: Option<PathBuf>,
    /// RS256 or ES256 public key (PEM) for --auth jwt.
    #[arg(long, env = "ASKGATE_JWT_PUBLIC_KEY_FILE")]
    pub jwt_public_key_file: Option<PathBuf>,
    /// JSON Web Key Set for --auth jwt; tokens pick a key by `kid`.
    #[arg(long, env = "ASKGATE_JWT_JWKS_FILE")]
    pub jwt_jwks_file: Option<PathBuf>,
    /// The URL of the identity provider's JSON Web Key Set for --auth jwt (its
    /// `jwks_uri`): fetched at start, again when a token names a key not held, and
    /// every 5 minutes; tokens pick a key by `kid`.
    #[arg(long, env = "ASKGATE_JWT_JWKS_URL")]
    pub jwt_jwks_url: Option<String>,
    /// Required `iss` of tokens.
    #[arg(long, env = "ASKGATE_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// Required `aud` of tokens.
    #[arg(long, env = "ASKGATE_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// The claim of a token that names its caller's groups (a string or an array of
    /// strings): what an ask's approvers may name.
    #[arg(long, env = "ASKGATE_JWT_GROUPS_CLAIM", default_value = DEFAULT_GROUPS_CLAIM)]
    pub jwt_groups_claim: String,
}

/// Server TLS (`--tls-*`): [`TlsConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "TLS")]
pub struct TlsArgs {
    /// Server certificate chain (PEM): serve TLS.
    #[arg(long, env = "ASKGATE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Server private key (PEM).
    #[arg(long, env = "ASKGATE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that signs client certificates: require them (mTLS).
    #[arg(long, env = "ASKGATE_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

/// The metrics listener (`--metrics*`): [`MetricsConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Metrics")]
pub struct MetricsArgs {
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9090).
    #[arg(long, env = "ASKGATE_METRICS")]
    pub metrics: Option<SocketAddr>,
    /// Label metrics by tenant (one series per tenant: mind the cardinality).
    #[arg(long, env = "ASKGATE_METRICS_TENANT_LABELS")]
    pub metrics_tenant_labels: bool,
    /// File holding a bearer token that scrapers must send
    /// (`authorization: Bearer <token>`). A metrics address off loopback needs it,
    /// or --metrics-allow-anonymous.
    #[arg(long, env = "ASKGATE_METRICS_TOKEN_FILE")]
    pub metrics_token_file: Option<PathBuf>,
    /// Serve metrics without a token on a non-loopback address (e.g. behind a
    /// NetworkPolicy that admits only the scraper).
    #[arg(
        long,
        env = "ASKGATE_METRICS_ALLOW_ANONYMOUS",
        conflicts_with = "metrics_token_file"
    )]
    pub metrics_allow_anonymous: bool,
}

/// Trace export (`--otlp-*`): [`TraceExport`](askgate_server::telemetry::TraceExport).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Traces (OTLP)")]
pub struct OtlpArgs {
    /// Export traces over OTLP to this collector: the span of each ask's wait (a child
    /// of the agent's span when the call carries a W3C `traceparent`), of the calls
    /// that answer or cancel it, and of deliveries (docs/operations.md, "Traces").
    /// `http://collector:4317` for gRPC, `http://collector:4318` with
    /// `--otlp-protocol http`; `https://` for TLS. Headers (a vendor's API key) from
    /// `OTEL_EXPORTER_OTLP_HEADERS`. Unset: no traces, and no cost.
    #[arg(long, env = "ASKGATE_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// OTLP over gRPC, or over HTTP with protobuf bodies (to `{endpoint}/v1/traces`).
    #[arg(
        long,
        env = "ASKGATE_OTLP_PROTOCOL",
        value_enum,
        default_value = "grpc",
        requires = "otlp_endpoint"
    )]
    pub otlp_protocol: OtlpProtocolArg,
    /// The share of traces started here that are exported (0 to 1). A call that
    /// carries a `traceparent` follows its sampled flag instead.
    #[arg(
        long,
        env = "ASKGATE_OTLP_SAMPLING",
        default_value_t = 1.0,
        requires = "otlp_endpoint"
    )]
    pub otlp_sampling: f64,
    /// Also export a span for every Redis or SQLite call (several per ask: for
    /// debugging, not for production).
    #[arg(long, env = "ASKGATE_OTLP_BACKEND_CALLS", requires = "otlp_endpoint")]
    pub otlp_backend_calls: bool,
}

/// How asks wait and come (`--ask-*`, `--max-wait`, `--agent-heartbeat`, `--notify-*`): [`AskConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Asks")]
pub struct AskArgs {
    /// Asks a tenant may start per second, sustained.
    #[arg(long, env = "ASKGATE_ASK_RATE", default_value_t = AskConfig::default().rate.per_second)]
    pub ask_rate: u32,
    /// Asks a tenant may start at once above the sustained rate.
    #[arg(long, env = "ASKGATE_ASK_BURST", default_value_t = AskConfig::default().rate.burst)]
    pub ask_burst: u32,
    /// Longest an Ask waits when its caller set no deadline or a longer one.
    #[arg(long, env = "ASKGATE_MAX_WAIT", default_value = span(AskConfig::default().max_wait), value_parser = parse_duration)]
    pub max_wait: Duration,
    /// Interval of the heartbeats on an agent's Attach stream.
    #[arg(long, env = "ASKGATE_AGENT_HEARTBEAT", default_value = span(AskConfig::default().agent_heartbeat), value_parser = parse_duration)]
    pub agent_heartbeat: Duration,
    /// Reminders for asks that set no `notify`: the first this long after the ask (0:
    /// none).
    #[arg(long, env = "ASKGATE_NOTIFY_REMIND_AFTER", default_value = ms_span(AskConfig::default().default_notify.remind_after_ms), value_parser = parse_duration)]
    pub notify_remind_after: Duration,
    /// Then one every this long (0: only the first).
    #[arg(long, env = "ASKGATE_NOTIFY_REMIND_EVERY", default_value = ms_span(AskConfig::default().default_notify.remind_every_ms), value_parser = parse_duration)]
    pub notify_remind_every: Duration,
    /// At most this many reminders (0: no limit).
    #[arg(long, env = "ASKGATE_NOTIFY_MAX_REMINDERS", default_value_t = AskConfig::default().default_notify.max_reminders)]
    pub notify_max_reminders: u32,
    /// Escalate asks that set no `notify` once, this long after the ask (0: never).
    #[arg(long, env = "ASKGATE_NOTIFY_ESCALATE_AFTER", default_value = ms_span(AskConfig::default().default_notify.escalate_after_ms), value_parser = parse_duration)]
    pub notify_escalate_after: Duration,
}

/// The sizes, limits and windows of the state: [`StateConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "State limits")]
pub struct StateArgs {
    /// Pending asks one tenant may hold over all its sessions.
    #[arg(long, env = "ASKGATE_MAX_PENDING_PER_TENANT", default_value_t = StateConfig::default().max_pending_per_tenant)]
    pub max_pending_per_tenant: usize,
    /// Bytes the pending asks of one tenant may hold over every node (their questions,
    /// options, details and labels as encoded); an ask past it is refused
    /// TOO_MANY_PENDING.
    #[arg(long, env = "ASKGATE_MAX_PENDING_BYTES_PER_TENANT", default_value_t = StateConfig::default().max_pending_bytes_per_tenant)]
    pub max_pending_bytes_per_tenant: u64,
    /// Bytes the pending asks of one session may hold.
    #[arg(long, env = "ASKGATE_MAX_PENDING_BYTES_PER_SESSION", default_value_t = StateConfig::default().max_pending_bytes_per_session)]
    pub max_pending_bytes_per_session: u64,
    /// Open subscriptions one session may have.
    #[arg(long, env = "ASKGATE_MAX_SUBSCRIBERS_PER_SESSION", default_value_t = StateConfig::default().max_subscribers_per_session)]
    pub max_subscribers_per_session: usize,
    /// Open `all_sessions` subscriptions one tenant may have.
    #[arg(long, env = "ASKGATE_MAX_ALL_SESSIONS_PER_TENANT", default_value_t = StateConfig::default().max_all_sessions_per_tenant)]
    pub max_all_sessions_per_tenant: usize,
    /// Agents one tenant may have attached at once.
    #[arg(long, env = "ASKGATE_MAX_AGENTS_PER_TENANT", default_value_t = StateConfig::default().max_agents_per_tenant)]
    pub max_agents_per_tenant: usize,
    /// Sessions one tenant may hold state in at once (pending asks, subscribers, or a
    /// history kept for resume).
    #[arg(long, env = "ASKGATE_MAX_SESSIONS_PER_TENANT", default_value_t = StateConfig::default().max_sessions_per_tenant)]
    pub max_sessions_per_tenant: usize,
    /// Subscribe streams (of one session or all) one tenant may have open at once, over
    /// every node.
    #[arg(long, env = "ASKGATE_MAX_STREAMS_PER_TENANT", default_value_t = StateConfig::default().max_streams_per_tenant)]
    pub max_streams_per_tenant: usize,
    /// MCP sessions one tenant may have open on /mcp at once, over every node (each
    /// holds some 60 KB until it is deleted or idles out); past it `initialize` gets 429.
    #[arg(long, env = "ASKGATE_MAX_MCP_SESSIONS_PER_TENANT", default_value_t = StateConfig::default().max_mcp_sessions_per_tenant)]
    pub max_mcp_sessions_per_tenant: usize,
    /// Pending asks one session may hold.
    #[arg(long, env = "ASKGATE_MAX_PENDING_PER_SESSION", default_value_t = StateConfig::default().max_pending_per_session)]
    pub max_pending_per_session: usize,
    /// Events each session keeps for cursor resume.
    #[arg(long, env = "ASKGATE_HISTORY_LEN", default_value_t = StateConfig::default().history_len)]
    pub history_len: usize,
    /// Bytes (of encoded events) each session's history keeps at most: past them the
    /// oldest events drop, and a resume from before them gets `reset`.
    #[arg(long, env = "ASKGATE_HISTORY_BYTES", default_value_t = StateConfig::default().history_bytes)]
    pub history_bytes: u64,
    /// How long a session counts as attended after its last subscriber left (so a UI
    /// reconnecting does not cause NO_PROVIDER), and how long its history is kept.
    #[arg(long, env = "ASKGATE_RECONNECT_GRACE", default_value = span(StateConfig::default().reconnect_grace), value_parser = parse_duration)]
    pub reconnect_grace: Duration,
    /// How long the outcome of an ask with a request_id is kept for a retrying call.
    #[arg(long, env = "ASKGATE_REQUEST_RETENTION", default_value = span(StateConfig::default().request_retention), value_parser = parse_duration)]
    pub request_retention: Duration,
    /// Events a subscriber may fall behind before it gets `reset` and a fresh snapshot.
    #[arg(long, env = "ASKGATE_SUBSCRIBER_BUFFER", default_value_t = StateConfig::default().subscriber_buffer)]
    pub subscriber_buffer: usize,
    /// Bytes a tenant's audit records may hold: past them its oldest records are
    /// dropped, as retention drops them (the newest always stays).
    #[arg(long, env = "ASKGATE_MAX_AUDIT_BYTES_PER_TENANT", default_value_t = StateConfig::default().max_audit_bytes_per_tenant)]
    pub max_audit_bytes_per_tenant: u64,
}

/// What one request may hold (`--max-questions`, ...): [`Limits`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Request limits")]
pub struct LimitArgs {
    /// Questions per ask.
    #[arg(long, env = "ASKGATE_MAX_QUESTIONS", default_value_t = Limits::default().max_questions)]
    pub max_questions: usize,
    /// Options per question.
    #[arg(long, env = "ASKGATE_MAX_OPTIONS", default_value_t = Limits::default().max_options)]
    pub max_options: usize,
    /// Bytes of a question id, option label or header.
    #[arg(long, env = "ASKGATE_MAX_LABEL_BYTES", default_value_t = Limits::default().max_label_bytes)]
    pub max_label_bytes: usize,
    /// Bytes of a question text, option description or cancel reason.
    #[arg(long, env = "ASKGATE_MAX_TEXT_BYTES", default_value_t = Limits::default().max_text_bytes)]
    pub max_text_bytes: usize,
    /// Bytes of a question's detail.
    #[arg(long, env = "ASKGATE_MAX_DETAIL_BYTES", default_value_t = Limits::default().max_detail_bytes)]
    pub max_detail_bytes: usize,
    /// Bytes of a free-text answer.
    #[arg(long, env = "ASKGATE_MAX_CUSTOM_BYTES", default_value_t = Limits::default().max_custom_bytes)]
    pub max_custom_bytes: usize,
}

/// Connections, HTTP/2, messages and shutdown: [`TransportConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connections")]
pub struct TransportArgs {
    /// How long shutdown waits for open calls before closing connections.
    #[arg(long, env = "ASKGATE_DRAIN_TIMEOUT", default_value = span(TransportConfig::default().drain_timeout), value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// HTTP/2 keepalive PING interval (dead peers are noticed and their Asks aborted).
    #[arg(long, env = "ASKGATE_KEEPALIVE_INTERVAL", default_value = span(TransportConfig::default().keepalive_interval), value_parser = parse_duration)]
    pub keepalive_interval: Duration,
    /// How long a keepalive PING may go unanswered.
    #[arg(long, env = "ASKGATE_KEEPALIVE_TIMEOUT", default_value = span(TransportConfig::default().keepalive_timeout), value_parser = parse_duration)]
    pub keepalive_timeout: Duration,
    /// Client connections this node holds at once; one past it is closed at once.
    #[arg(long, env = "ASKGATE_MAX_CONNECTIONS", default_value_t = TransportConfig::default().connections.max_connections)]
    pub max_connections: usize,
    /// A connection with no request in flight that sends nothing for this long is
    /// closed (a live HTTP/2 peer answers keepalive PINGs and stays).
    #[arg(long, env = "ASKGATE_IDLE_TIMEOUT", default_value = span(TransportConfig::default().connections.idle_timeout), value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// HTTP/2 streams (calls) one connection may have open at once: every blocked Ask
    /// holds one, so a pool of agent workers on a few connections needs many.
    #[arg(long, env = "ASKGATE_HTTP2_MAX_STREAMS", default_value_t = TransportConfig::default().http2.max_concurrent_streams)]
    pub http2_max_streams: u32,
    /// HTTP/2 flow-control window of one stream, in bytes: how much of a request the
    /// client may send before the server reads it.
    #[arg(long, env = "ASKGATE_HTTP2_STREAM_WINDOW", default_value_t = TransportConfig::default().http2.stream_window)]
    pub http2_stream_window: u32,
    /// HTTP/2 flow-control window of a whole connection, in bytes.
    #[arg(long, env = "ASKGATE_HTTP2_CONNECTION_WINDOW", default_value_t = TransportConfig::default().http2.connection_window)]
    pub http2_connection_window: u32,
    /// Largest request message, in bytes.
    #[arg(long, env = "ASKGATE_MAX_MESSAGE_BYTES", default_value_t = TransportConfig::default().max_message_bytes)]
    pub max_message_bytes: usize,
}

/// The HTTP side of the port (`--cors-origin`, `--public-url`, `--console`): [`HttpConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "HTTP: browsers and the console")]
pub struct HttpArgs {
    /// A web origin (`https://app.example.com`) whose pages may call the API over
    /// gRPC-Web; repeat it, or give `*` for any origin. Without it, only pages served
    /// by askgate itself (the console) may: a browser request from any other origin is
    /// refused with 403 (`--allowed-origin` is the same flag).
    #[arg(
        long = "cors-origin",
        visible_alias = "allowed-origin",
        env = "ASKGATE_CORS_ORIGIN",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// The URL this node is reached by from outside (`https://askgate.example.com`, a
    /// proxy's): on a loopback listener its host is accepted besides the loopback
    /// names, and browsers on its origin may call the API.
    #[arg(long, env = "ASKGATE_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Serve the browser console at /console/ (`on` or `off`).
    #[arg(long, env = "ASKGATE_CONSOLE", default_value = switch(HttpConfig::default().console), action = clap::ArgAction::Set,
          value_parser = on_off())]
    pub console: bool,
}

/// MCP at /mcp (`--mcp`, `--mcp-max-wait`, `--max-mcp-sessions`): [`McpServing`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "MCP")]
pub struct McpServeArgs {
    /// Serve MCP over streamable HTTP at /mcp on this port (`on` or `off`): agents'
    /// MCP clients ask through it with an agent credential and the `askgate-session`
    /// header.
    #[arg(long, env = "ASKGATE_MCP", default_value = switch(McpServing::default().enabled), action = clap::ArgAction::Set,
          value_parser = on_off())]
    pub mcp: bool,
    /// Longest one MCP tool call waits before it returns "still waiting" with an ask_id
    /// for `await_user_answer` (the question stays open); default: until answered.
    #[arg(long, env = "ASKGATE_MCP_MAX_WAIT", value_parser = parse_duration)]
    pub mcp_max_wait: Option<Duration>,
    /// MCP sessions this node holds at once, over all tenants; past it `initialize`
    /// on /mcp gets 429.
    #[arg(long, env = "ASKGATE_MAX_MCP_SESSIONS", default_value_t = McpServing::default().max_sessions)]
    pub max_mcp_sessions: usize,
}

/// Webhook delivery (`--webhook-*`): [`WebhookConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Webhooks")]
pub struct WebhookArgs {
    /// Accept webhook endpoints on loopback, private and link-local addresses (for
    /// tests and private networks: on a shared server it lets tenants reach your
    /// internal services).
    #[arg(long, env = "ASKGATE_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,
    /// Delay before a failed webhook delivery's first retry; each next one doubles
    /// (with jitter) up to --webhook-retry-max.
    #[arg(long, env = "ASKGATE_WEBHOOK_RETRY_INITIAL", default_value = span(WebhookConfig::default().retry_initial), value_parser = parse_duration)]
    pub webhook_retry_initial: Duration,
    #[arg(long, env = "ASKGATE_WEBHOOK_RETRY_MAX", default_value = span(WebhookConfig::default().retry_max), value_parser = parse_duration)]
    pub webhook_retry_max: Duration,
    /// How long a webhook delivery is retried before it is marked FAILED (then
    /// `askgate webhooks redeliver` sends it again).
    #[arg(long, env = "ASKGATE_WEBHOOK_RETRY_FOR", default_value = span(WebhookConfig::default().retry_for), value_parser = parse_duration)]
    pub webhook_retry_for: Duration,
    /// Longest one webhook attempt may take: connect, TLS, request and response.
    #[arg(long, env = "ASKGATE_WEBHOOK_TIMEOUT", default_value = span(WebhookConfig::default().timeout), value_parser = parse_duration)]
    pub webhook_timeout: Duration,
    /// Webhook endpoints one tenant may have.
    #[arg(long, env = "ASKGATE_WEBHOOK_MAX_ENDPOINTS", default_value_t = WebhookConfig::default().limits.max_endpoints)]
    pub webhook_max_endpoints: usize,
    /// Undelivered webhook deliveries one tenant may have queued; events past it are
    /// dropped (and counted in askgate_webhook_deliveries_total{outcome="dropped"}).
    #[arg(long, env = "ASKGATE_WEBHOOK_MAX_QUEUED", default_value_t = WebhookConfig::default().limits.max_queued)]
    pub webhook_max_queued: usize,
    /// Delivered and failed deliveries kept per tenant for `ListDeliveries`.
    #[arg(long, env = "ASKGATE_WEBHOOK_KEEP", default_value_t = WebhookConfig::default().limits.keep_finished)]
    pub webhook_keep: usize,
    /// Webhook attempts this node makes at once.
    #[arg(long, env = "ASKGATE_WEBHOOK_CONCURRENCY", default_value_t = WebhookConfig::default().concurrency)]
    pub webhook_concurrency: usize,
    /// Of those, attempts one tenant may make at once (its slow endpoints then delay
    /// only its own deliveries).
    #[arg(long, env = "ASKGATE_WEBHOOK_CONCURRENCY_PER_TENANT", default_value_t = WebhookConfig::default().per_tenant)]
    pub webhook_concurrency_per_tenant: usize,
    /// Of those, attempts to one endpoint (or Slack app) at once.
    #[arg(long, env = "ASKGATE_WEBHOOK_CONCURRENCY_PER_ENDPOINT", default_value_t = WebhookConfig::default().per_endpoint)]
    pub webhook_concurrency_per_endpoint: usize,
}

/// Where the chat and mail channels send: [`ChannelConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Channels")]
pub struct ChannelArgs {
    /// Slack's Web API: askgate posts and updates Slack apps' messages there (a proxy's,
    /// or a fake's in tests).
    #[arg(long, env = "ASKGATE_SLACK_API_URL", default_value = askgate_server::channels::slack::api::DEFAULT_API_URL)]
    pub slack_api_url: String,
    /// Telegram's Bot API: askgate sends and edits Telegram bots' messages there (a
    /// proxy's, or a fake's in tests).
    #[arg(long, env = "ASKGATE_TELEGRAM_API_URL", default_value = askgate_server::channels::telegram::api::DEFAULT_API_URL)]
    pub telegram_api_url: String,
    /// The SMTP server email routes mail through: `smtp://host:587?tls=required`
    /// (STARTTLS), `smtps://host:465` (TLS), or `smtp://host:25` (plain: a relay on a
    /// network you trust); the user as `smtp://user@host…`.
    #[arg(long, env = "ASKGATE_SMTP_URL")]
    pub smtp_url: Option<String>,
    /// File holding the SMTP user's password.
    #[arg(long, env = "ASKGATE_SMTP_PASSWORD_FILE")]
    pub smtp_password_file: Option<PathBuf>,
    /// The sender of askgate's mail (`askgate <askgate@example.com>`).
    #[arg(long, env = "ASKGATE_EMAIL_FROM")]
    pub email_from: Option<String>,
}

/// The keys of sealed secrets and receipts, and how long proof is kept: [`ApprovalConfig`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Approvals: keys, receipts, audit")]
pub struct ApprovalArgs {
    /// The key that seals tenants' secrets (Slack apps' and Telegram bots' tokens) and secret answers in
    /// the store: 32 bytes, as 64 hex digits or base64 (`openssl rand -base64 32`),
    /// mode 600, the same on every node. Without it: a random key per process on the
    /// memory engine, one kept in the data directory on sqlite; on Redis, no Slack apps,
    /// no Telegram bots and no secret questions.
    #[arg(long, env = "ASKGATE_SECRET_KEY_FILE")]
    pub secret_key_file: Option<PathBuf>,
    /// An Ed25519 private key (PKCS#8 PEM: `openssl genpkey -algorithm ed25519`) that
    /// signs the receipts of asks with an action. Repeat to rotate: the first signs,
    /// every one is published at /.well-known/jwks.json. None: no receipts.
    #[arg(
        long = "receipt-key-file",
        env = "ASKGATE_RECEIPT_KEY_FILE",
        value_delimiter = ','
    )]
    pub receipt_key_files: Vec<PathBuf>,
    /// How long a receipt stays valid.
    #[arg(long, env = "ASKGATE_RECEIPT_TTL", default_value = span(ApprovalConfig::default().receipt_ttl), value_parser = parse_duration)]
    pub receipt_ttl: Duration,
    /// How long the audit log keeps a record (each tenant's newest is always kept: the
    /// next links to it).
    #[arg(long, env = "ASKGATE_AUDIT_RETENTION", default_value = span(ApprovalConfig::default().audit_retention), value_parser = parse_duration)]
    pub audit_retention: Duration,
}
