//! What leaves the node for a URL a tenant or an operator gave: the guarded HTTP
//! sender every outbound channel (webhooks, Slack, Telegram, ntfy), the trace exporter
//! and the receipt key fetch use, and IANA's special-purpose address registries
//! behind its guard.

pub mod send;
pub mod special_purpose;
