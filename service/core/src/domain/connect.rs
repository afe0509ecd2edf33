//! The rules of what a tenant connects to reach its humans: webhook endpoints' and
//! Slack apps' descriptions and filters, and a Slack app's credentials and channel.

use askgate_proto::v1::{
    ConnectEmailRequest, ConnectNtfyRequest, ConnectSlackRequest, ConnectTelegramRequest,
};

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

/// What is wrong with a chat channel's session prefix, description and label filter.
fn chat_filter(
    session_prefix: &str,
    description: &str,
    labels: &std::collections::HashMap<String, String>,
    limits: &Limits,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    if !session_prefix.is_empty()
        && let Err(e) = validate::session_id("session_prefix", session_prefix)
    {
        violations.extend(e.violations().iter().cloned());
    }
    violations.extend(described_filter(description, labels, limits));
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
    violations.extend(chat_filter(
        &request.session_prefix,
        &request.description,
        &request.labels,
        limits,
    ));
    violations
}

/// Bytes of a Telegram chat id (`-1001234567890`, `@channelusername`).
pub const MAX_CHAT_ID_BYTES: usize = 64;

/// What is wrong with a request to connect a Telegram bot, field by field: the token
/// as @BotFather makes it (`<bot id>:<secret>`, no characters a URL path would
/// change), a chat id, a session prefix and a filter.
pub fn telegram_bot(request: &ConnectTelegramRequest, limits: &Limits) -> Vec<Violation> {
    let mut violations = Vec::new();
    let token_ok = request
        .bot_token
        .split_once(':')
        .is_some_and(|(id, secret)| {
            !id.is_empty()
                && id.len() <= 20
                && id.bytes().all(|b| b.is_ascii_digit())
                && !secret.is_empty()
                && secret.len() <= MAX_TOKEN_BYTES
                && secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if !token_ok {
        violations.push(Violation::new(
            "bot_token",
            "required: the bot's token from @BotFather, such as 123456:ABC-DEF1234ghIkl",
        ));
    }
    let chat = request.chat_id.trim();
    let numeric = chat
        .strip_prefix('-')
        .unwrap_or(chat)
        .bytes()
        .all(|b| b.is_ascii_digit());
    let username = chat.strip_prefix('@').is_some_and(|name| {
        (5..=32).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if chat.is_empty() || chat.len() > MAX_CHAT_ID_BYTES || !(numeric && chat != "-" || username) {
        violations.push(Violation::new(
            "chat_id",
            "required: a chat's numeric id (-1001234567890) or @channelusername",
        ));
    }
    violations.extend(chat_filter(
        &request.session_prefix,
        &request.description,
        &request.labels,
        limits,
    ));
    violations
}

/// Addresses one email route mails at most.
pub const MAX_EMAIL_RECIPIENTS: usize = 10;
/// Bytes of one address with its display name.
pub const MAX_EMAIL_ADDRESS_BYTES: usize = 320;

/// What is wrong with a request to connect an email route, field by field, besides the
/// addresses' syntax (which the mailer checks): 1-10 of them, each on one line and
/// within its length, none repeated; a session prefix and a filter.
pub fn email_route(request: &ConnectEmailRequest, limits: &Limits) -> Vec<Violation> {
    let mut violations = Vec::new();
    if request.to.is_empty() || request.to.len() > MAX_EMAIL_RECIPIENTS {
        violations.push(Violation::new(
            "to",
            format!("required: 1-{MAX_EMAIL_RECIPIENTS} addresses"),
        ));
    }
    for (i, address) in request.to.iter().enumerate().take(MAX_EMAIL_RECIPIENTS) {
        let repeated = request.to[..i]
            .iter()
            .any(|a| a.trim().eq_ignore_ascii_case(address.trim()));
        if address.trim().is_empty()
            || address.len() > MAX_EMAIL_ADDRESS_BYTES
            || address.chars().any(char::is_control)
            || repeated
        {
            violations.push(Violation::new(
                format!("to[{i}]"),
                format!("an address of at most {MAX_EMAIL_ADDRESS_BYTES} bytes, on one line, not repeated"),
            ));
        }
    }
    violations.extend(chat_filter(
        &request.session_prefix,
        &request.description,
        &request.labels,
        limits,
    ));
    violations
}

/// Characters of an ntfy topic (ntfy's own limit).
pub const MAX_NTFY_TOPIC_CHARS: usize = 64;

/// What is wrong with a request to connect an ntfy topic, field by field, besides the
/// server's URL (which the sender checks): a topic as ntfy takes them, a token without
/// spaces, a session prefix and a filter.
pub fn ntfy_topic(request: &ConnectNtfyRequest, limits: &Limits) -> Vec<Violation> {
    let mut violations = Vec::new();
    let topic = &request.topic;
    if topic.is_empty()
        || topic.len() > MAX_NTFY_TOPIC_CHARS
        || !topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        violations.push(Violation::new(
            "topic",
            format!("required: 1-{MAX_NTFY_TOPIC_CHARS} characters of A-Z a-z 0-9 _ -"),
        ));
    }
    if let Some(token) = &request.token
        && (token.is_empty()
            || token.len() > MAX_TOKEN_BYTES
            || token.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        violations.push(Violation::new(
            "token",
            format!("at most {MAX_TOKEN_BYTES} bytes, without spaces"),
        ));
    }
    violations.extend(chat_filter(
        &request.session_prefix,
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
    fn a_telegram_bot_needs_a_token_a_chat_and_a_valid_filter() {
        let limits = Limits::default();
        let good = ConnectTelegramRequest {
            bot_token: "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11".into(),
            chat_id: "-1001234567890".into(),
            ..Default::default()
        };
        assert!(telegram_bot(&good, &limits).is_empty());
        let channel = ConnectTelegramRequest {
            chat_id: "@askgate_ops".into(),
            ..good.clone()
        };
        assert!(telegram_bot(&channel, &limits).is_empty());
        for (token, chat) in [
            ("", "1"),
            ("123456", "1"),
            ("abc:def", "1"),
            ("123:de/f", "1"),
            ("123:def", ""),
            ("123:def", "-"),
            ("123:def", "@ab"),
            ("123:def", "12a"),
            ("123:def", "@bad name"),
        ] {
            let bad = ConnectTelegramRequest {
                bot_token: token.into(),
                chat_id: chat.into(),
                ..Default::default()
            };
            assert!(!telegram_bot(&bad, &limits).is_empty(), "{token} {chat}");
        }
        let prefixed = ConnectTelegramRequest {
            session_prefix: "bad prefix\n".into(),
            ..good
        };
        assert_eq!(
            fields(&telegram_bot(&prefixed, &limits)),
            ["session_prefix"]
        );
    }

    #[test]
    fn an_email_route_needs_one_to_ten_distinct_addresses() {
        let limits = Limits::default();
        let good = ConnectEmailRequest {
            to: vec!["ana@example.com".into(), "Bo <bo@example.com>".into()],
            ..Default::default()
        };
        assert!(email_route(&good, &limits).is_empty());
        let none = ConnectEmailRequest::default();
        assert_eq!(fields(&email_route(&none, &limits)), ["to"]);
        let many = ConnectEmailRequest {
            to: (0..11).map(|i| format!("p{i}@example.com")).collect(),
            ..Default::default()
        };
        assert_eq!(fields(&email_route(&many, &limits)), ["to"]);
        let bad = ConnectEmailRequest {
            to: vec![
                "ana@example.com".into(),
                "ANA@example.com ".into(),
                "x@example.com\r\nBcc: eve@example.com".into(),
                "".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            fields(&email_route(&bad, &limits)),
            ["to[1]", "to[2]", "to[3]"]
        );
    }

    #[test]
    fn an_ntfy_topic_is_one_ntfy_takes() {
        let limits = Limits::default();
        let good = ConnectNtfyRequest {
            server_url: "https://ntfy.sh".into(),
            topic: "askgate-ops_7f3a".into(),
            token: Some("tk_abc".into()),
            ..Default::default()
        };
        assert!(ntfy_topic(&good, &limits).is_empty());
        for topic in ["", "a/b", "with space", &"t".repeat(65)] {
            let bad = ConnectNtfyRequest {
                topic: topic.into(),
                ..good.clone()
            };
            assert_eq!(fields(&ntfy_topic(&bad, &limits)), ["topic"], "{topic}");
        }
        let token = ConnectNtfyRequest {
            token: Some("tk a".into()),
            ..good
        };
        assert_eq!(fields(&ntfy_topic(&token, &limits)), ["token"]);
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
