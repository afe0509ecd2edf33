//! `askgate serve`: flags (and `ASKGATE_*` variables) to [`ServerConfig`], bind, run.

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use clap::Args;
use tracing::error;

use super::{EXIT_USAGE, parse_duration, shutdown_signal};
use crate::{
    api::deadline::MAX_WAIT_SECS,
    backend::memory::MemoryConfig,
    domain::Limits,
    server::{ServerConfig, run as run_server},
};

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "ASKGATE_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    /// Longest an Ask waits when its caller set no deadline or a longer one.
    #[arg(long, env = "ASKGATE_MAX_WAIT", default_value = "1h", value_parser = parse_duration)]
    pub max_wait: Duration,
    /// How long shutdown waits for open calls before closing connections.
    #[arg(long, env = "ASKGATE_DRAIN_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// HTTP/2 keepalive PING interval (dead peers are noticed and their Asks aborted).
    #[arg(long, env = "ASKGATE_KEEPALIVE_INTERVAL", default_value = "20s", value_parser = parse_duration)]
    pub keepalive_interval: Duration,
    /// How long a keepalive PING may go unanswered.
    #[arg(long, env = "ASKGATE_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub keepalive_timeout: Duration,
    /// Largest request message, in bytes.
    #[arg(long, env = "ASKGATE_MAX_MESSAGE_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_message_bytes: usize,
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
    /// Pending asks one session may hold.
    #[arg(long, env = "ASKGATE_MAX_PENDING_PER_SESSION", default_value_t = MemoryConfig::default().max_pending_per_session)]
    pub max_pending_per_session: usize,
    /// Events each session keeps for cursor resume.
    #[arg(long, env = "ASKGATE_HISTORY_LEN", default_value_t = MemoryConfig::default().history_len)]
    pub history_len: usize,
    /// How long a session counts as attended after its last subscriber left (so a UI
    /// reconnecting does not cause NO_PROVIDER), and how long its history is kept.
    #[arg(long, env = "ASKGATE_RECONNECT_GRACE", default_value = "5s", value_parser = parse_duration)]
    pub reconnect_grace: Duration,
    /// How long the outcome of an ask with a request_id is kept for a retrying call.
    #[arg(long, env = "ASKGATE_REQUEST_RETENTION", default_value = "10m", value_parser = parse_duration)]
    pub request_retention: Duration,
    /// Interval of the heartbeats on an agent's Attach stream.
    #[arg(long, env = "ASKGATE_AGENT_HEARTBEAT", default_value = "10s", value_parser = parse_duration)]
    pub agent_heartbeat: Duration,
    /// Events a subscriber may fall behind before it gets `reset` and a fresh snapshot.
    #[arg(long, env = "ASKGATE_SUBSCRIBER_BUFFER", default_value_t = MemoryConfig::default().subscriber_buffer)]
    pub subscriber_buffer: usize,
}

impl ServeArgs {
    /// The server configuration these flags describe; refuses values that cannot work.
    pub fn to_config(&self) -> Result<ServerConfig, String> {
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
        ];
        if let Some((flag, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{flag} must be at least 1"));
        }
        if self.agent_heartbeat.is_zero() {
            return Err("--agent-heartbeat must be longer than zero".into());
        }
        if self.max_wait.is_zero() || self.max_wait.as_secs() > MAX_WAIT_SECS {
            return Err("--max-wait must be longer than zero and at most 30 days".into());
        }
        let limits = Limits {
            max_questions: self.max_questions,
            max_options: self.max_options,
            max_label_bytes: self.max_label_bytes,
            max_text_bytes: self.max_text_bytes,
            max_detail_bytes: self.max_detail_bytes,
            max_custom_bytes: self.max_custom_bytes,
            max_labels: Limits::default().max_labels,
        };
        Ok(ServerConfig {
            memory: MemoryConfig {
                history_len: self.history_len,
                subscriber_buffer: self.subscriber_buffer,
                max_pending_per_session: self.max_pending_per_session,
                reconnect_grace: self.reconnect_grace,
                request_retention: self.request_retention,
                ..MemoryConfig::default()
            },
            limits,
            max_wait: self.max_wait,
            drain_timeout: self.drain_timeout,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            max_message_bytes: self.max_message_bytes,
            agent_heartbeat: self.agent_heartbeat,
        })
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
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(e) => {
            error!(listen = %args.listen, "failed to listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run_server(listener, config, shutdown_signal()).await {
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
    fn impossible_values_are_refused() {
        assert!(parse(&["--max-questions", "0"]).to_config().is_err());
        assert!(parse(&["--max-wait", "0s"]).to_config().is_err());
        assert!(parse(&["--max-wait", "31days"]).to_config().is_err());
    }
}
