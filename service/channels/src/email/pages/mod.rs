//! `/answer/{token}` on askgate's HTTP port: the pages an email's signed links open
//! (and `/link/{token}`, a mailed identity link's: [`identity`])
//! (docs/email.md). A link is believed only once verified: its MAC is the server's
//! (constant time), it has not expired, it was not used, and its route is still
//! connected. Then:
//! - GET shows the ask as a form (a link's option chosen already) and changes nothing,
//!   so a mail scanner that prefetches links answers nothing;
//! - POST sends the form: the answers (`q.<question id>` = an option's label, repeated
//!   for several; `custom.<question id>` = own words), or a cancellation (`cancel`,
//!   `reason`); with no field at all, an option's link chooses its option. It goes
//!   through `Answer` or `Cancel` as the link's person (`email:<address>`), checked like
//!   any other; once taken, the link is spent.

mod identity;
mod page;

use askgate_proto::v1::{AnswerRequest, CancelRequest, QuestionAnswer, Requested};
use bytes::Bytes;
use http::{Method, StatusCode, request::Parts};
use tracing::warn;

use super::settled::{USED_TTL_MS, remember_settled, settled_key};
use crate::{
    channel::chat,
    delivery::Hooks,
    domain::{Answered, Error, Resolver, approval, validate::MAX_CANCEL_REASON_BYTES},
    ingress::{Ingress, Reply},
    links::{IDENTITY_PATH, LINK_PATH, Link},
    resolve::Questions,
};

/// Bytes of a form read at most: a batch's answers in own words fit.
const MAX_BODY_BYTES: usize = 256 * 1024;
/// Answers the pages of signed links.
#[derive(Clone)]
pub struct Links {
    hooks: Hooks,
    questions: Questions,
}

fn notice(status: StatusCode, title: &str, text: &str) -> Reply {
    Reply::html(status, page::notice(title, &[text.to_owned()]))
}

/// What a sent form did, in words for its page.
struct Sent {
    title: &'static str,
    done: String,
    /// What was sent, one line per question.
    what: Vec<String>,
}

/// What a refused answer says.
fn refusal(error: &Error) -> (StatusCode, String) {
    match error {
        Error::NotPending { settled: Some(s) } => (
            StatusCode::CONFLICT,
            format!(
                "Too late: {} by {} already.",
                s.resolution.as_str_name().to_lowercase(),
                s.resolved_by
            ),
        ),
        Error::NotPending { settled: None } => (
            StatusCode::CONFLICT,
            "This ask was resolved already.".into(),
        ),
        Error::AlreadyApproved => (StatusCode::CONFLICT, error.to_string()),
        Error::BadAnswer(_) | Error::BadRequest(_) => (StatusCode::BAD_REQUEST, error.to_string()),
        Error::ChannelNotAllowed { .. }
        | Error::NotAnApprover { .. }
        | Error::SelfApproval
        | Error::PermissionDenied(_) => (StatusCode::FORBIDDEN, error.to_string()),
        e => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[async_trait::async_trait]
impl Ingress for Links {
    fn claims(&self, path: &str) -> bool {
        path.starts_with(LINK_PATH) || path.starts_with(IDENTITY_PATH)
    }

    fn max_body(&self) -> usize {
        MAX_BODY_BYTES
    }

    fn precheck(&self, parts: &Parts) -> Result<(), Reply> {
        match parts.method {
            Method::GET | Method::POST => Ok(()),
            _ => Err(Reply::json(StatusCode::METHOD_NOT_ALLOWED, None)),
        }
    }

    async fn handle(&self, parts: Parts, body: Bytes) -> Reply {
        if let Some(token) = parts.uri.path().strip_prefix(IDENTITY_PATH) {
            return self.identity(&parts.method, token).await;
        }
        let token = parts.uri.path().strip_prefix(LINK_PATH).unwrap_or_default();
        let now = crate::channel::clock::now_ms();
        let link = match self.hooks.channels().links.verify(token, now) {
            Ok(link) => link,
            Err(why) => return notice(StatusCode::FORBIDDEN, "This link does nothing", why),
        };
        // Who answers through it: its person, through its channel (`Link::verify` took
        // only links of a link channel).
        let Some(channel) = link.channel() else {
            return notice(
                StatusCode::FORBIDDEN,
                "Not a link",
                "This link is not one of askgate's.",
            );
        };
        let by = Resolver::new(&link.who, channel);
        let used = Link::used_key(token);
        match self.hooks.store().note(&used).await {
            Ok(None) => {}
            Ok(Some(_)) => {
                return notice(
                    StatusCode::GONE,
                    "This link was used",
                    "It answers nothing more.",
                );
            }
            Err(e) => return unavailable(&e),
        }
        match self
            .hooks
            .store()
            .endpoint(&link.tenant, &link.endpoint)
            .await
        {
            Ok(Some(route)) if route.email().is_some() || route.ntfy().is_some() => {}
            Ok(_) => {
                let text = "What sent it was disconnected: it answers nothing.";
                return notice(StatusCode::GONE, "This link does nothing", text);
            }
            Err(e) => return unavailable(&e),
        }
        let requested = match self.pending(&link).await {
            Ok(Some(requested)) => requested,
            Ok(None) => return self.resolved_page(&link, &by).await,
            Err(e) => return unavailable(&e),
        };
        // An ask with approvers is for them alone; a channel that cannot tell who
        // answers (an ntfy topic's page) answers none.
        let store = self.hooks.store();
        let asked = (link.tenant.as_str(), &requested);
        let approver = |cancelling| {
            crate::channel::chat::standing(&**store, asked, (channel, &link.who), cancelling)
        };
        let answerable =
            approval::may_answer(&requested, channel, true) && approver(false).await.is_ok();
        let cancellable =
            approval::may_resolve(&requested, channel) && approver(true).await.is_ok();
        let may = (answerable, cancellable);
        if parts.method == Method::GET {
            let form = page::form(&requested, may, link.option, &link.who, None);
            return Reply::html(StatusCode::OK, form);
        }
        let sent = self.post(&link, &by, &requested, &body).await;
        match sent {
            Ok(sent) => {
                if let Err(e) = self
                    .hooks
                    .store()
                    .put_note(&used, "1", USED_TTL_MS, false)
                    .await
                {
                    warn!("noting a spent link failed: {e}");
                }
                let page = page::sent(sent.title, &sent.done, &sent.what, &link.who);
                Reply::html(StatusCode::OK, page)
            }
            Err(e @ (Error::BadAnswer(_) | Error::BadRequest(_))) => {
                let (status, text) = refusal(&e);
                let form = page::form(&requested, may, None, &link.who, Some(&text));
                Reply::html(status, form)
            }
            Err(e) => {
                let (status, text) = refusal(&e);
                notice(status, "Not sent", &text)
            }
        }
    }
}

fn unavailable(error: &Error) -> Reply {
    warn!("answering a link failed: {error}");
    notice(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again",
        "askgate could not take this now: try again in a moment.",
    )
}

impl Links {
    pub fn new(hooks: Hooks, questions: Questions) -> Self {
        Self { hooks, questions }
    }

    async fn pending(&self, link: &Link) -> Result<Option<Requested>, Error> {
        let pending = self
            .questions
            .list_pending(&link.tenant, link.session.clone())
            .await?;
        Ok(pending.into_iter().find(|r| r.rpc_id == link.rpc))
    }

    /// The page of a link whose ask is resolved: how it ended and who won, as the
    /// note kept when it was resolved says, else as the engine still knows it.
    async fn resolved_page(&self, link: &Link, by: &Resolver) -> Reply {
        let title = "This ask is resolved";
        match self
            .hooks
            .store()
            .note(&settled_key(&link.tenant, &link.rpc))
            .await
        {
            Ok(Some(words)) => {
                let lines: Vec<String> = words.lines().map(str::to_owned).collect();
                return Reply::html(StatusCode::CONFLICT, page::notice(title, &lines));
            }
            Ok(None) => {}
            Err(e) => warn!("reading how an ask ended failed: {e}"),
        }
        let (status, text) = refusal(&self.late(link, by).await);
        notice(status, title, &text)
    }

    /// Keeps how the link's ask ended, in `lines`, for its other links.
    async fn remember(&self, link: &Link, lines: &[String]) {
        remember_settled(&**self.hooks.store(), &link.tenant, &link.rpc, lines).await;
    }

    /// Why a link of a resolved ask does nothing: who won, as the engine knows it.
    async fn late(&self, link: &Link, by: &Resolver) -> Error {
        let request = AnswerRequest {
            session_id: link.session.clone(),
            rpc_id: link.rpc.clone(),
            answers: Vec::new(),
            grant: None,
        };
        let answered = self.questions.answer(&link.tenant, request, by).await;
        answered.err().unwrap_or_else(Error::not_pending)
    }

    /// Sends the form: what was done, in words.
    async fn post(
        &self,
        link: &Link,
        by: &Resolver,
        requested: &Requested,
        body: &[u8],
    ) -> Result<Sent, Error> {
        let fields: Vec<(String, String)> = form_urlencoded::parse(body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let field = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        if field("cancel").is_some() {
            let reason = field("reason").unwrap_or_default().trim();
            let reason = chat::cut(reason, MAX_CANCEL_REASON_BYTES / 4);
            let said = match reason.is_empty() {
                true => String::new(),
                false => format!(": {reason}"),
            };
            let request = CancelRequest {
                session_id: link.session.clone(),
                rpc_id: link.rpc.clone(),
                reason,
                ..Default::default()
            };
            self.questions.cancel(&link.tenant, request, by).await?;
            let done = format!("Too late: cancelled by {}{said}", link.who);
            self.remember(link, &[done]).await;
            return Ok(Sent {
                title: "Cancelled",
                done: format!("The ask is cancelled{said}."),
                what: Vec::new(),
            });
        }
        let answers = answers(requested, &fields, link.option);
        let what = chat::answered_lines(requested, &answers);
        let request = AnswerRequest {
            session_id: link.session.clone(),
            rpc_id: link.rpc.clone(),
            answers,
            grant: None,
        };
        let answered = self.questions.answer(&link.tenant, request, by).await?;
        Ok(match answered {
            Answered::Resolved => {
                let mut lines = vec![format!("Too late: answered by {}.", link.who)];
                lines.extend(what.iter().cloned());
                self.remember(link, &lines).await;
                Sent {
                    title: "Sent",
                    done: "Your answer is sent:".into(),
                    what,
                }
            }
            Answered::Voted { votes, needed } => Sent {
                title: "Vote recorded",
                done: format!(
                    "Your vote is recorded: {votes} of {needed} approvals. The ask resolves \
                     when {} more give the same answers.",
                    needed.saturating_sub(votes)
                ),
                what,
            },
        })
    }
}

/// The answers a form gives: per question its chosen labels (`q.<id>`, repeated) and
/// its own words (`custom.<id>`, when not blank). A form with no answering field at all
/// (an option's link POSTed as is) chooses the link's option.
fn answers(
    requested: &Requested,
    fields: &[(String, String)],
    option: Option<usize>,
) -> Vec<QuestionAnswer> {
    let answering = |k: &str| k.starts_with("q.") || k.starts_with("custom.");
    if !fields.iter().any(|(k, _)| answering(k))
        && let (Some(n), [q]) = (option, requested.questions.as_slice())
        && let Some(chosen) = q.options.get(n)
    {
        return vec![QuestionAnswer {
            id: q.id.clone(),
            selected: vec![chosen.label.clone()],
            custom: None,
        }];
    }
    requested
        .questions
        .iter()
        .map(|q| {
            let (select, custom) = (format!("q.{}", q.id), format!("custom.{}", q.id));
            QuestionAnswer {
                id: q.id.clone(),
                selected: fields
                    .iter()
                    .filter(|(k, _)| *k == select)
                    .map(|(_, v)| v.clone())
                    .collect(),
                custom: fields
                    .iter()
                    .find(|(k, v)| *k == custom && !v.trim().is_empty())
                    .map(|(_, v)| v.trim().to_owned()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{Question, QuestionOption};

    use super::*;

    fn ask() -> Requested {
        let options = ["yes", "no"]
            .map(|label| QuestionOption {
                label: label.into(),
                ..Default::default()
            })
            .to_vec();
        Requested {
            questions: vec![Question {
                id: "q".into(),
                question: "Ship?".into(),
                options,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn a_form_answers_by_its_fields_and_a_bare_option_link_by_its_option() {
        let by_form = answers(
            &ask(),
            &fields(&[("q.q", "no"), ("custom.q", "  ")]),
            Some(0),
        );
        assert_eq!(by_form[0].selected, ["no"]);
        assert_eq!(by_form[0].custom, None);
        let bare = answers(&ask(), &[], Some(1));
        assert_eq!(bare[0].selected, ["no"]);
        let words = answers(&ask(), &fields(&[("custom.q", " later ")]), None);
        assert_eq!(words[0].custom.as_deref(), Some("later"));
        let nothing = answers(&ask(), &[], None);
        assert!(nothing[0].selected.is_empty() && nothing[0].custom.is_none());
    }
}
