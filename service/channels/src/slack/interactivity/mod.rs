//! `/slack/interactivity` on askgate's HTTP port: the clicks and forms of askgate's
//! Slack messages (and `/slack/commands/…`, its slash command: [`commands`]). A request is believed only once it is verified:
//! - it names an app of askgate's (the ref its controls carry; see [`Ref`]), and the
//!   app's signing secret signed it: `X-Slack-Signature` is `v0=` + the hex HMAC-SHA256
//!   of `v0:{X-Slack-Request-Timestamp}:{body}`, compared in constant time;
//! - its timestamp is within five minutes of now, and its signature was not seen
//!   before (a replay is refused, on every node of a Redis deployment);
//! - it comes from the app's workspace.
//!
//! Then a choice or a form goes through `Answer` (or `Cancel`) as `slack:<team>/<user>`,
//! and the request is acknowledged at once (Slack waits 3 s); the message itself is
//! updated by the `resolved` event's delivery, whoever resolved the ask.

use std::time::{Duration, SystemTime};

use askgate_proto::v1::{AnswerRequest, CancelRequest, QuestionAnswer, Requested};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::blocks::{self, Ref};
use crate::{
    backend::hooks::records::EndpointRecord,
    channel::chat,
    delivery::Hooks,
    domain::{Error, Resolver, model::SLACK_CHANNEL, validate::MAX_CANCEL_REASON_BYTES},
    resolve::Questions,
};

/// Where Slack sends interactions.
pub const INTERACTIVITY_PATH: &str = "/slack/interactivity";
/// Bytes of an interaction read at most (Slack's are a few kilobytes; a click on a
/// large message carries the message).
const MAX_BODY_BYTES: usize = 256 * 1024;
/// How far a request's timestamp may be from now.
const TOLERANCE: Duration = Duration::from_secs(5 * 60);
/// How long a seen signature is remembered: past the tolerance on both sides.
const SEEN_TTL_MS: u64 = 11 * 60 * 1000;
/// Slack's deadline for the acknowledgement is 3 s: a call made before it (`views.open`,
/// `chat.postEphemeral`) must fit well within.
const SLACK_CALL_TIMEOUT: Duration = Duration::from_millis(2500);

/// Why a request that is signed, but not by a connected app's secret, is refused.
const UNVERIFIED: &str = "not signed by a connected Slack app";

/// Answers Slack's interactions.
#[derive(Clone)]
pub struct Interactivity {
    hooks: Hooks,
    questions: Questions,
}

/// What the handler answers Slack: a status and an optional JSON body.
type Reply = (StatusCode, Option<Value>);

fn refused(why: &str) -> Reply {
    debug!("Slack interaction refused: {why}");
    (StatusCode::UNAUTHORIZED, Some(json!({ "error": why })))
}

fn ok() -> Reply {
    (StatusCode::OK, None)
}

/// The `payload` field of a form-encoded body.
fn payload(body: &[u8]) -> Option<Value> {
    let (_, json) = form_urlencoded::parse(body).find(|(name, _)| name == "payload")?;
    serde_json::from_str(&json).ok()
}

/// The ref an interaction carries: a form's private metadata, the clicked control's
/// value, or (a checkbox change, which has none) any control's of its message.
fn ref_of(payload: &Value) -> Option<Ref> {
    if payload["type"] == "view_submission" {
        return Ref::decode(payload["view"]["private_metadata"].as_str()?);
    }
    if let Some(found) = payload["actions"][0]["value"]
        .as_str()
        .and_then(Ref::decode)
    {
        return Some(found);
    }
    payload["message"]["blocks"]
        .as_array()?
        .iter()
        .filter_map(|b| b["elements"].as_array())
        .flatten()
        .find_map(|e| e["value"].as_str().and_then(Ref::decode))
}

/// What the headers of a request say of its signature, checked before its body is
/// read: both present, the timestamp fresh, the signature well-formed.
struct Signed<'a> {
    timestamp: &'a str,
    signature: Vec<u8>,
}

fn signed_headers(headers: &HeaderMap, now: SystemTime) -> Result<Signed<'_>, &'static str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let timestamp =
        header("x-slack-request-timestamp").ok_or("unsigned: no X-Slack-Request-Timestamp")?;
    let signature = header("x-slack-signature").ok_or("unsigned: no X-Slack-Signature")?;
    let seconds: u64 = timestamp.parse().map_err(|_| "a malformed timestamp")?;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
    let skew = now
        .duration_since(at)
        .or_else(|e| Ok::<_, ()>(e.duration()));
    if skew.map_or(true, |d| d > TOLERANCE) {
        return Err("stale: the timestamp is more than five minutes from now");
    }
    let signature = signature
        .strip_prefix("v0=")
        .and_then(|h| hex::decode(h).ok())
        .filter(|bytes| bytes.len() == ring::digest::SHA256_OUTPUT_LEN)
        .ok_or("a malformed signature")?;
    Ok(Signed {
        timestamp,
        signature,
    })
}

/// Checks Slack's signature of `body` with the app's `secret`, and the timestamp.
/// Returns the signature's bytes in hex as the request's replay key: the same bytes
/// however the header spells them (hex is read in either case).
fn verify(
    headers: &HeaderMap,
    body: &[u8],
    secret: &[u8],
    now: SystemTime,
) -> Result<String, &'static str> {
    let Signed {
        timestamp,
        signature: given,
    } = signed_headers(headers, now)?;
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut signed = format!("v0:{timestamp}:").into_bytes();
    signed.extend_from_slice(body);
    ring::hmac::verify(&key, &signed, &given).map_err(|_| UNVERIFIED)?;
    Ok(hex::encode(given))
}

/// A Slack id (team, user): letters and digits, or nothing.
fn slack_id(value: &Value) -> &str {
    value
        .as_str()
        .filter(|id| {
            !id.is_empty() && id.len() <= 32 && id.chars().all(|c| c.is_ascii_alphanumeric())
        })
        .unwrap_or("unknown")
}

/// The labels of the options chosen in an element's state (values are indexes).
fn chosen(state: &Value, question: &askgate_proto::v1::Question) -> Vec<String> {
    let single = state["selected_option"]["value"].as_str().into_iter();
    let many = state["selected_options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["value"].as_str());
    single
        .chain(many)
        .filter_map(|v| v.parse::<usize>().ok())
        .filter_map(|i| question.options.get(i))
        .map(|o| o.label.clone())
        .collect()
}

/// The answers of the answer form: per question its choices and its text; empty is a
/// skip.
fn form_answers(values: &Value, requested: &Requested) -> Vec<QuestionAnswer> {
    requested
        .questions
        .iter()
        .enumerate()
        .map(|(i, question)| {
            let block = &values[format!("q{i}")];
            let typed = [
                block[blocks::TEXT]["value"].as_str(),
                values[format!("q{i}.other")][blocks::TEXT]["value"].as_str(),
            ];
            let custom = typed
                .into_iter()
                .flatten()
                .map(str::trim)
                .find(|t| !t.is_empty());
            QuestionAnswer {
                id: question.id.clone(),
                selected: chosen(&block[blocks::CHOICE], question),
                custom: custom.map(str::to_owned),
            }
        })
        .collect()
}

impl Interactivity {
    pub fn new(hooks: Hooks, questions: Questions) -> Self {
        Self { hooks, questions }
    }

    /// One interaction: verified, then acted on; what to answer Slack.
    pub async fn interaction(&self, headers: &HeaderMap, body: &[u8]) -> Reply {
        let Some(payload) = payload(body) else {
            return (
                StatusCode::BAD_REQUEST,
                Some(json!({ "error": "no payload" })),
            );
        };
        let Some(at) = ref_of(&payload) else {
            return refused("not an interaction with askgate's controls");
        };
        let app = match self.verified(&at.tenant, &at.app, headers, body).await {
            Ok(app) => app,
            Err(reply) => return reply,
        };
        let Some(target) = app.slack.as_ref() else {
            return refused(UNVERIFIED);
        };
        let team = slack_id(&payload["team"]["id"]);
        if !target.team_id.is_empty() && team != target.team_id {
            return refused("another workspace");
        }
        if !at.session.starts_with(&app.session_prefix) && !self.escalated_to(&at, &app.id).await {
            return refused("a session outside the app's");
        }
        let who = format!("slack:{team}/{}", slack_id(&payload["user"]["id"]));
        match payload["type"].as_str() {
            Some("block_actions") => self.action(&app, &at, &payload, &who).await,
            Some("view_submission") => self.submission(&at, &payload, &who).await,
            _ => ok(),
        }
    }

    /// The Slack app `app` of `tenant`, once the request is verified as signed by it:
    /// its signing secret's signature, fresh, not seen before (on any node).
    async fn verified(
        &self,
        tenant: &str,
        app: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<EndpointRecord, Reply> {
        let app = match self.hooks.store().endpoint(tenant, app).await {
            Ok(Some(app)) if app.slack.is_some() => app,
            // As for a bad signature: which apps exist is not for unsigned callers.
            Ok(_) => return Err(refused(UNVERIFIED)),
            Err(e) => {
                warn!("reading a Slack app failed: {e}");
                return Err((StatusCode::SERVICE_UNAVAILABLE, None));
            }
        };
        let Some(target) = app.slack.as_ref() else {
            return Err(refused(UNVERIFIED));
        };
        let secret = match self
            .hooks
            .channels()
            .slack
            .open_secret(&app, &target.signing_secret)
        {
            Ok(secret) => secret,
            Err(e) => {
                warn!(app = %app.id, "a Slack app's signing secret does not open: {e}");
                return Err(refused("the app's signing secret is unusable"));
            }
        };
        let signature = verify(headers, body, secret.expose().as_bytes(), SystemTime::now())
            .map_err(refused)?;
        match self
            .hooks
            .store()
            .put_note(&format!("slack-seen:{signature}"), "1", SEEN_TTL_MS, true)
            .await
        {
            Ok(true) => Ok(app),
            Ok(false) => Err(refused("replayed: this request was seen before")),
            Err(e) => {
                warn!("recording a Slack request failed: {e}");
                Err((StatusCode::SERVICE_UNAVAILABLE, None))
            }
        }
    }

    /// Whether the pending ask `at` names was sent to app `app` by one of its
    /// escalation steps (whatever the app's session prefix).
    async fn escalated_to(&self, at: &Ref, app: &str) -> bool {
        matches!(
            self.pending(at).await,
            Ok(Some(requested)) if requested
                .escalation
                .iter()
                .any(|s| s.notify_channels.iter().any(|id| id == app))
        )
    }

    /// The ask a ref names, while it is pending.
    async fn pending(&self, at: &Ref) -> Result<Option<Requested>, Error> {
        let pending = self
            .questions
            .list_pending(&at.tenant, at.session.clone())
            .await?;
        Ok(pending.into_iter().find(|r| r.rpc_id == at.rpc))
    }

    async fn answer(&self, at: &Ref, answers: Vec<QuestionAnswer>, who: &str) -> Result<(), Error> {
        let request = AnswerRequest {
            session_id: at.session.clone(),
            rpc_id: at.rpc.clone(),
            answers,
            grant: None,
        };
        let by = Resolver::new(who, SLACK_CHANNEL);
        self.questions.answer(&at.tenant, request, &by).await?;
        Ok(())
    }

    /// A click in a message: a choice, the checkboxes' Submit, or a form to open.
    async fn action(&self, app: &EndpointRecord, at: &Ref, payload: &Value, who: &str) -> Reply {
        let action = &payload["actions"][0];
        if action["action_id"] == blocks::CHECKS {
            // A checkbox changed: nothing is sent until Submit.
            return ok();
        }
        let requested = match self.pending(at).await {
            Ok(Some(requested)) => requested,
            // Resolved already: its message is being updated to say so.
            Ok(None) => return ok(),
            Err(e) => {
                warn!("reading a pending ask for Slack failed: {e}");
                return (StatusCode::SERVICE_UNAVAILABLE, None);
            }
        };
        let Some(question) = requested.questions.first() else {
            return ok();
        };
        let action_id = action["action_id"].as_str();
        // A form is opened for approvers only.
        let cancelling = action_id == Some(blocks::CANCEL);
        let asked = (at.tenant.as_str(), &requested);
        let store = self.hooks.store();
        let standing = chat::standing(&**store, asked, (SLACK_CHANNEL, who), cancelling).await;
        if let Err(refusal) = standing {
            self.tell(app, payload, &refusal).await;
            return ok();
        }
        let answered = match action_id {
            Some(id) if blocks::is_choice(id) => {
                let Some(option) = at.option.and_then(|i| question.options.get(i)) else {
                    return ok();
                };
                let answer = QuestionAnswer {
                    id: question.id.clone(),
                    selected: vec![option.label.clone()],
                    custom: None,
                };
                self.answer(at, vec![answer], who).await
            }
            Some(blocks::SUBMIT) => {
                let state = &payload["state"]["values"][blocks::CHECKS_BLOCK][blocks::CHECKS];
                let answer = QuestionAnswer {
                    id: question.id.clone(),
                    selected: chosen(state, question),
                    custom: None,
                };
                self.answer(at, vec![answer], who).await
            }
            Some(blocks::OPEN) => {
                return self
                    .open(app, payload, &blocks::answer_modal(at, &requested))
                    .await;
            }
            Some(blocks::CANCEL) => {
                let modal = blocks::cancel_modal(at, MAX_CANCEL_REASON_BYTES);
                return self.open(app, payload, &modal).await;
            }
            _ => return ok(),
        };
        match answered {
            Ok(()) => {}
            // A late click: the message shows the outcome once the ask resolves.
            Err(e @ Error::NotPending { .. }) => {
                debug!(rpc_id = %at.rpc, "a Slack answer was not taken: {e}");
            }
            // A refused answer: the clicking user alone is told why.
            Err(e) => self.tell(app, payload, &e).await,
        }
        ok()
    }

    /// Tells the user who clicked in `payload` why nothing happened, in a message
    /// only they see (`chat.postEphemeral`), within Slack's 3 s.
    async fn tell(&self, app: &EndpointRecord, payload: &Value, refusal: &Error) {
        let (Some(channel), Some(user)) = (
            payload["channel"]["id"].as_str(),
            payload["user"]["id"].as_str(),
        ) else {
            return;
        };
        let text = blocks::cut(&chat::refusal(refusal), 300);
        let request = json!({ "channel": channel, "user": user, "text": text });
        self.call_in_time(
            app,
            "chat.postEphemeral",
            &request,
            "telling a Slack user why",
        )
        .await;
    }

    /// Calls Slack's `method` for `app` within [`SLACK_CALL_TIMEOUT`] (an interaction
    /// is acknowledged within Slack's 3 s); a failure is logged as `doing` failed.
    async fn call_in_time(&self, app: &EndpointRecord, method: &str, request: &Value, doing: &str) {
        let call = self.hooks.channels().slack.call(app, method, request);
        match tokio::time::timeout(SLACK_CALL_TIMEOUT, call).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!(app = %app.id, "{doing} failed: {e}"),
            Err(_) => warn!(app = %app.id, "{doing} timed out"),
        }
    }

    /// Opens a form for the clicking user (within Slack's 3 s).
    async fn open(&self, app: &EndpointRecord, payload: &Value, view: &Value) -> Reply {
        let Some(trigger) = payload["trigger_id"].as_str() else {
            return ok();
        };
        let request = json!({ "trigger_id": trigger, "view": view });
        self.call_in_time(app, "views.open", &request, "opening a Slack form")
            .await;
        ok()
    }

    /// A submitted form: the answers of a batch, or a cancellation with its reason.
    /// A refusal shows in the form, next to the first question.
    async fn submission(&self, at: &Ref, payload: &Value, who: &str) -> Reply {
        let view = &payload["view"];
        let values = &view["state"]["values"];
        let (result, block) = match view["callback_id"].as_str() {
            Some(blocks::ANSWER_VIEW) => match self.pending(at).await {
                Ok(Some(requested)) => {
                    let answers = form_answers(values, &requested);
                    (self.answer(at, answers, who).await, "q0")
                }
                Ok(None) => (Err(Error::not_pending()), "q0"),
                Err(e) => (Err(e), "q0"),
            },
            Some(blocks::CANCEL_VIEW) => {
                let reason = values[blocks::REASON_BLOCK][blocks::TEXT]["value"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                let request = CancelRequest {
                    session_id: at.session.clone(),
                    rpc_id: at.rpc.clone(),
                    reason,
                    ..Default::default()
                };
                (
                    self.questions
                        .cancel(&at.tenant, request, &Resolver::new(who, SLACK_CHANNEL))
                        .await,
                    blocks::REASON_BLOCK,
                )
            }
            _ => return ok(),
        };
        match result {
            Ok(()) => ok(),
            Err(e) => {
                let message = match e {
                    Error::NotPending { settled: Some(s) } => format!(
                        "Too late: {} by {} already.",
                        s.resolution.as_str_name().to_lowercase(),
                        blocks::cut(&s.resolved_by, 100)
                    ),
                    Error::NotPending { settled: None } => {
                        "This question was resolved already.".to_owned()
                    }
                    e => blocks::cut(&e.to_string(), 300),
                };
                let errors = json!({ "response_action": "errors", "errors": { block: message } });
                (StatusCode::OK, Some(errors))
            }
        }
    }
}

#[async_trait::async_trait]
impl crate::ingress::Ingress for Interactivity {
    fn claims(&self, path: &str) -> bool {
        path == INTERACTIVITY_PATH || path.starts_with(commands::COMMANDS_PATH)
    }

    fn max_body(&self) -> usize {
        MAX_BODY_BYTES
    }

    /// Only a POST whose headers could be Slack's (signed, fresh) is read.
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), crate::ingress::Reply> {
        if parts.method != Method::POST {
            return Err((StatusCode::METHOD_NOT_ALLOWED, None).into());
        }
        signed_headers(&parts.headers, SystemTime::now())
            .map_err(|why| crate::ingress::Reply::from(refused(why)))?;
        Ok(())
    }

    async fn handle(&self, parts: http::request::Parts, body: Bytes) -> crate::ingress::Reply {
        if let Some(app) = parts.uri.path().strip_prefix(commands::COMMANDS_PATH) {
            return self.command(app, &parts.headers, &body).await.into();
        }
        self.interaction(&parts.headers, &body).await.into()
    }
}

mod commands;
#[cfg(test)]
mod tests;
