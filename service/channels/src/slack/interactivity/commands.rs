//! `/slack/commands/{tenant}/{app}`: the slash command a Slack app of askgate's sends
//! (docs/slack.md "Linking people"). Its request URL names the app, whose signing
//! secret must have signed it (fresh, never seen before), from the app's workspace.
//! `/link CODE` adds the sender (`slack:<team>/<user>`) to the person whose one-time
//! code it is (`People.StartLink`); the reply is ephemeral: only the sender sees it,
//! and a slash command's text is never shown to the channel.

use http::{HeaderMap, StatusCode};
use serde_json::json;

use super::{Interactivity, Reply, UNVERIFIED, refused, slack_id};
use crate::{
    backend::{audit_log::Audit, hooks::records::PersonRecord},
    channel::chat,
    domain::{Resolver, model::SLACK_CHANNEL},
};

/// Where a Slack app's slash command is sent: `{COMMANDS_PATH}{tenant}/{app id}`.
pub const COMMANDS_PATH: &str = "/slack/commands/";

/// An ephemeral reply to the sender of a command.
fn ephemeral(text: &str) -> Reply {
    let text = super::blocks::cut(text, 300);
    (
        StatusCode::OK,
        Some(json!({ "response_type": "ephemeral", "text": text })),
    )
}

impl Interactivity {
    /// One slash command for the app `path` names (`{tenant}/{app id}`).
    pub(super) async fn command(&self, path: &str, headers: &HeaderMap, body: &[u8]) -> Reply {
        let Some((tenant, app)) = path.split_once('/') else {
            return refused(UNVERIFIED);
        };
        let app = match self.verified(tenant, app, headers, body).await {
            Ok(app) => app,
            Err(reply) => return reply,
        };
        let field = |name: &str| {
            form_urlencoded::parse(body)
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let team = field("team_id");
        let team = slack_id(&json!(team)).to_owned();
        let target_team = app.slack.as_ref().map(|t| t.team_id.as_str()).unwrap_or("");
        if !target_team.is_empty() && team != target_team {
            return refused("another workspace");
        }
        let text = field("text");
        let mut words = text.split_whitespace();
        let code = match (words.next(), words.next(), words.next()) {
            (Some(code), None, _) => code,
            (Some(verb), Some(code), None) if verb.eq_ignore_ascii_case("link") => code,
            _ => return ephemeral("Send the code the console gave you: /link CODE"),
        };
        let user = slack_id(&json!(field("user_id"))).to_owned();
        if team == "unknown" || user == "unknown" {
            return refused("a command names its team and user");
        }
        let identity = format!("{SLACK_CHANNEL}:{team}/{user}");
        let audit = |person: &PersonRecord| {
            let by = Resolver::new(&identity, SLACK_CHANNEL);
            let details = json!({ "id": person.id, "linked": identity });
            Audit::admin_entry(&app.tenant, &by, "person.linked", details)
        };
        let store = self.hooks.store();
        match crate::backend::people::link(&**store, &app.tenant, code, &identity, audit).await {
            Ok(person) => ephemeral(&format!(
                "Linked: your answers here count as {}.",
                person.shown_name()
            )),
            Err(e) => ephemeral(&chat::refusal(&e)),
        }
    }
}
