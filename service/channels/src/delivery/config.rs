//! How webhooks and reminders behave: every default written once, here; the CLI's
//! flags take theirs from [`WebhookConfig::default`].

use std::time::Duration;

use crate::backend::hooks::StoreLimits;

/// How webhooks and reminders behave (`--webhook-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Endpoints may be on loopback and private addresses (tests, private networks).
    pub allow_private: bool,
    /// The first retry's delay; each later one doubles, up to `retry_max`.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// How long a delivery is retried before it is marked failed.
    pub retry_for: Duration,
    /// Longest one attempt may take (connect, TLS, request, response).
    pub timeout: Duration,
    pub limits: StoreLimits,
    /// Attempts one node makes at once.
    pub concurrency: usize,
    /// Of those, what one tenant may make at once, and one endpoint (a Slack app
    /// counts as one): a tenant's slow endpoints then delay only that tenant.
    pub per_tenant: usize,
    pub per_endpoint: usize,
    /// How often each node looks for due deliveries and timers.
    pub poll: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            retry_initial: Duration::from_secs(5),
            retry_max: Duration::from_secs(3600),
            retry_for: Duration::from_secs(24 * 3600),
            timeout: Duration::from_secs(10),
            limits: StoreLimits {
                max_endpoints: 20,
                max_queued: 1000,
                keep_finished: 1000,
                max_people: crate::backend::hooks::DEFAULT_MAX_PEOPLE,
            },
            concurrency: 64,
            per_tenant: 16,
            per_endpoint: 8,
            poll: Duration::from_millis(250),
        }
    }
}
