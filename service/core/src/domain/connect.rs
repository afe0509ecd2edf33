//! The rules of what a tenant connects to reach its humans: webhook endpoints' and
//! Slack apps' descriptions and filters, and a Slack app's credentials and channel.

use askgate_proto::v1::ConnectSlackRequest;

use super::{Limits, Violation, validate};

/// Bytes of an endpoint's or an app's description.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
/// Bytes of a Slack bot token or signing secret.
pub const MAX_TOKEN_BYTES: usize = 512;
/// Bytes of a Slack channel id.
pub const MAX_CHANNEL_BYTES: usize = 80;

/// What is wrong with a description and a label filter (an endpoint's or an app's).
pub fn described_filter(
    description: &str,
    labels: &std::collections::HashMap<String, String>,
    limits: &Limits,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    if let Err(e) = validate::text("description", description, MAX_DESCRIPTION_BYTES) {
        violations.extend(e.violations().iter().cloned());
    }
    violations.extend(validate::labels(labels, limits));
    violations
}

/// What is wrong with a request to connect a Slack app, field by field.
pub fn slack_app(request: &ConnectSlackRequest, limits: &Limits) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (field, value) in [
        ("bot_token", &request.bot_token),
        ("signing_secret", &request.signing_secret),
    ] {
        if value.is_empty()
            || value.len() > MAX_TOKEN_BYTES
            || value.chars().any(char::is_whitespace)
        {
            violations.push(Violation::new(
                field,
                format!("required: at most {MAX_TOKEN_BYTES} bytes, without spaces"),
            ));
        }
    }
    let channel = request.channel.trim();
    let channel_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '#');
    if channel.is_empty() || channel.len() > MAX_CHANNEL_BYTES || !channel.chars().all(channel_ok) {
        violations.push(Violation::new(
            "channel",
            "required: a channel id such as C0123456789",
        ));
    }
    if !request.session_prefix.is_empty()
        && let Err(e) = validate::session_id("session_prefix", &request.session_prefix)
    {
        violations.extend(e.violations().iter().cloned());
    }
    violations.extend(described_filter(
        &request.description,
        &request.labels,
        limits,
    ));
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(violations: &[Violation]) -> Vec<&str> {
        violations.iter().map(|v| v.field.as_str()).collect()
    }

    #[test]
    fn a_slack_app_needs_its_secrets_a_channel_and_a_valid_filter() {
        let limits = Limits::default();
        let good = ConnectSlackRequest {
            bot_token: "xoxb-1".into(),
            signing_secret: "s3cret".into(),
            channel: " C0123456789 ".into(),
            ..Default::default()
        };
        assert!(slack_app(&good, &limits).is_empty());
        let bad = ConnectSlackRequest {
            bot_token: "xoxb 1".into(),
            signing_secret: "x".repeat(MAX_TOKEN_BYTES + 1),
            channel: "<#general>".into(),
            session_prefix: "bad prefix".into(),
            description: "d".repeat(MAX_DESCRIPTION_BYTES + 1),
            ..Default::default()
        };
        assert_eq!(
            fields(&slack_app(&bad, &limits)),
            [
                "bot_token",
                "signing_secret",
                "channel",
                "session_prefix",
                "description"
            ]
        );
    }
}
