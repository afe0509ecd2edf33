//! Answering by email (docs/email.md). A tenant connects a route (the addresses to
//! mail); from then on:
//! - each `requested` of the tenant that the route's filter lets through becomes a
//!   delivery of the shared machinery (leased, retried, any node on Redis) that mails
//!   each address, through `--smtp-url` from `--email-from`, the ask with signed
//!   single-use links of its own ([`crate::links`]);
//! - the ask's `resolved`, from whatever channel, becomes a delivery that mails each
//!   address a follow-up in the same thread (who answered what, or how it ended);
//! - a link opens a page on askgate's port ([`pages`]) that shows the ask and
//!   answers only when its form is sent, as `email:<address>`.

pub mod admin;
pub mod identity;
pub mod mail;
pub mod pages;
pub mod settled;

use std::{str::FromStr as _, time::Duration};

use askgate_core::domain::{approval, connect, model::EMAIL_CHANNEL};
use askgate_proto::v1::{ConnectEmailRequest, EmailRoute, Requested, Resolved};
use lettre::{
    AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor,
    message::{Mailbox, MultiPart},
    transport::smtp::authentication::Credentials,
};

use tracing::debug;
use uuid::Uuid;

use self::mail::{Links, Mail};
use super::{
    channel::{About, Channel, Checks, Connector, Outbound},
    links::{Link, Signer},
};
use crate::{
    backend::hooks::{
        HookStore,
        records::{ChannelTarget, DeliveryRecord, EmailTarget, EndpointRecord, EventType},
    },
    domain::{Error, Limits, Violation},
    secret::Secret,
};

/// How long a note that a mail went out is kept: past any ask's life.
const NOTE_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// Options of a single question that get a link each.
const MAX_OPTION_LINKS: usize = 20;

/// The SMTP server and the sender.
#[derive(Clone)]
struct Smtp {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

/// Email for the whole server: its SMTP server, and what signs the links.
#[derive(Clone)]
pub struct Email {
    smtp: Option<Smtp>,
    links: Signer,
}

/// How the server mails: `--smtp-url`, the password from `--smtp-password-file`,
/// `--email-from`.
pub struct SmtpConfig<'a> {
    pub url: &'a str,
    pub password: Option<Secret>,
    pub from: &'a str,
    pub timeout: Duration,
}

impl Email {
    pub fn new(smtp: Option<SmtpConfig<'_>>, links: Signer) -> Result<Self, String> {
        let smtp = smtp.map(Self::transport).transpose()?;
        Ok(Self { smtp, links })
    }

    fn transport(config: SmtpConfig<'_>) -> Result<Smtp, String> {
        let from = Mailbox::from_str(config.from)
            .map_err(|e| format!("--email-from {:?}: {e}", config.from))?;
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(config.url)
            .map_err(|e| {
                format!("--smtp-url: {e} (smtp://host:587?tls=required, smtps://host:465)")
            })?
            .timeout(Some(config.timeout));
        if let Some(password) = config.password {
            // The user is the URL's (smtp://user@host); the password is the file's.
            let user = user_of(config.url).ok_or(
                "--smtp-password-file needs the user in --smtp-url (smtp://user@host:587)",
            )?;
            builder = builder.credentials(Credentials::new(user, password.expose().to_owned()));
        }
        Ok(Smtp {
            transport: builder.build(),
            from,
        })
    }

    /// The SMTP server a route needs, or why the server cannot mail.
    fn ready(&self) -> Result<&Smtp, Error> {
        self.links.ready()?;
        self.smtp.as_ref().ok_or_else(|| {
            Error::PermissionDenied(
                "this server does not mail: start every node with --smtp-url and --email-from"
                    .into(),
            )
        })
    }

    /// Checks a connect request (each address as a mailbox) and makes the route's
    /// record.
    fn checked_record(
        &self,
        tenant: &str,
        request: ConnectEmailRequest,
        limits: &Limits,
    ) -> Result<EndpointRecord, Error> {
        self.ready()?;
        let mut violations = connect::email_route(&request, limits);
        let mut to = Vec::with_capacity(request.to.len());
        for (i, address) in request.to.iter().enumerate() {
            match Mailbox::from_str(address.trim()) {
                Ok(mailbox) => to.push(mailbox.to_string()),
                Err(e) => violations.push(Violation::new(
                    format!("to[{i}]"),
                    format!("not an address: {e}"),
                )),
            }
        }
        if !violations.is_empty() {
            return Err(Error::BadRequest(violations));
        }
        Ok(EndpointRecord {
            channel: Some(ChannelTarget::Email(EmailTarget { to })),
            ..crate::channel::chat::chat_endpoint(
                format!("em_{}", Uuid::now_v7().simple()),
                tenant,
                request.description,
                request.labels,
                request.session_prefix,
                request.provides,
            )
        })
    }

    /// One attempt of an email delivery: the ask's mail to each address that has not
    /// had it yet, or the follow-up once resolved (after the ask's mail went out).
    async fn attempt(
        &self,
        store: &dyn HookStore,
        route: &EndpointRecord,
        target: &EmailTarget,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        self.ready().map_err(|e| e.to_string())?;
        let (requested, resolved) = crate::channel::chat::read_chat_body(&delivery.body)?;
        match delivery.event_type {
            EventType::Requested | EventType::Resolved => {}
            other => return Err(format!("an email route does not take {}", other.as_str())),
        }
        // The pages of the ask's links, opened from now on, say how it ended.
        if let Some(resolved) = &resolved {
            let lines = settled::settled_lines(&requested, resolved);
            settled::remember_settled(store, &route.tenant, &delivery.rpc_id, &lines).await;
        }
        // Every person at once: an attempt lasts one SMTP timeout, within its lease,
        // however many there are.
        let sends = target.to.iter().enumerate().map(|(i, address)| {
            self.mail_one(
                store,
                route,
                delivery,
                (&requested, resolved.as_ref()),
                (i, address),
            )
        });
        for sent in futures_util::future::join_all(sends).await {
            sent?;
        }
        Ok(())
    }

    /// The ask's mail, or its follow-up, to person `i`, unless noted as sent already.
    async fn mail_one(
        &self,
        store: &dyn HookStore,
        route: &EndpointRecord,
        delivery: &DeliveryRecord,
        (requested, resolved): (&Requested, Option<&Resolved>),
        (i, address): (usize, &String),
    ) -> Result<(), String> {
        let smtp = self.ready().map_err(|e| e.to_string())?;
        let to = Mailbox::from_str(address).map_err(|e| format!("a stored address: {e}"))?;
        // An ask with approvers is mailed to them alone (the address, or its person,
        // named): no one else gets its links.
        let who = format!("{EMAIL_CHANNEL}:{}", to.email);
        let asked = (route.tenant.as_str(), requested);
        let approver = crate::channel::chat::standing(store, asked, (EMAIL_CHANNEL, &who), false);
        match approver.await {
            Ok(_) => {}
            Err(Error::NotAnApprover { .. }) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
        let asked = note_key(&route.id, &delivery.rpc_id, i, "asked");
        let sent = match resolved {
            None => asked.clone(),
            Some(_) => note_key(&route.id, &delivery.rpc_id, i, "resolved"),
        };
        if store
            .note(&sent)
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Ok(());
        }
        let mail = match resolved {
            None => {
                let links = self.links(route, requested, &to)?;
                let links = approval::may_answer(requested, EMAIL_CHANNEL, true).then_some(&links);
                mail::ask_mail(requested, links, &self.links.console())
            }
            Some(resolved) => {
                if store
                    .note(&asked)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none()
                {
                    // The ask's mail is still to go (or failed for good).
                    return Err(format!("the ask's mail to {address} is not sent yet"));
                }
                mail::resolved_mail(requested, resolved)
            }
        };
        let thread = message_id(&route.id, &delivery.rpc_id, i, "asked");
        let id = message_id(
            &route.id,
            &delivery.rpc_id,
            i,
            resolved.map_or("asked", |_| "resolved"),
        );
        self.send(smtp, to, mail, id, (resolved.is_some()).then_some(thread))
            .await?;
        store
            .put_note(&sent, "1", NOTE_TTL_MS, false)
            .await
            .map_err(|e| e.to_string())?;
        debug!(route = %route.id, rpc_id = %delivery.rpc_id, "mailed");
        Ok(())
    }

    /// The links of `to`'s mail.
    fn links(
        &self,
        route: &EndpointRecord,
        requested: &Requested,
        to: &Mailbox,
    ) -> Result<Links, String> {
        let now = crate::channel::clock::now_ms();
        let who = format!("{EMAIL_CHANNEL}:{}", to.email);
        let url = |option| {
            let link = Link::new(route, requested, who.clone(), option, now);
            self.links.url(&link)
        };
        let options = match requested.questions.as_slice() {
            [q] if q.options.len() <= MAX_OPTION_LINKS && !q.multi_select => (0..q.options.len())
                .map(|i| url(Some(i)))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        Ok(Links {
            form: url(None)?,
            options,
        })
    }

    async fn send(
        &self,
        smtp: &Smtp,
        to: Mailbox,
        mail: Mail,
        id: String,
        in_reply_to: Option<String>,
    ) -> Result<(), String> {
        let mut builder = Message::builder()
            .from(smtp.from.clone())
            .to(to)
            .subject(mail.subject)
            .message_id(Some(id));
        if let Some(thread) = in_reply_to {
            builder = builder.in_reply_to(thread.clone()).references(thread);
        }
        let message = builder
            .multipart(MultiPart::alternative_plain_html(mail.text, mail.html))
            .map_err(|e| format!("building the mail: {e}"))?;
        smtp.transport
            .send(message)
            .await
            .map_err(|e| format!("SMTP: {e}"))?;
        Ok(())
    }
}

/// The user of an SMTP URL (`smtp://user@host`), percent-decoded.
fn user_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    let user = userinfo.split(':').next()?;
    let user = percent_encoding_decode(user);
    (!user.is_empty()).then_some(user)
}

fn percent_encoding_decode(text: &str) -> String {
    form_urlencoded::parse(format!("u={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The note that mail `what` ("asked", "resolved") of an ask went to recipient `i`.
fn note_key(route: &str, rpc_id: &str, i: usize, what: &str) -> String {
    format!("email-{what}:{route}:{rpc_id}:{i}")
}

/// The Message-ID of mail `what` of an ask to recipient `i`: the same on every attempt
/// (a mail sent twice by attempts that died unheard is one message to mail clients).
fn message_id(route: &str, rpc_id: &str, i: usize, what: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{route}\u{1f}{rpc_id}\u{1f}{i}\u{1f}{what}"));
    format!("<{}.{what}@askgate>", hex::encode(&digest[..16]))
}

/// A route as the admin API shows it.
pub fn route_of(record: &EndpointRecord) -> Option<EmailRoute> {
    let target = record.email()?;
    Some(EmailRoute {
        id: record.id.clone(),
        to: target.to.clone(),
        labels: record.labels.clone(),
        session_prefix: record.session_prefix.clone(),
        description: record.description.clone(),
        provides: record.provides,
        created_at: Some(crate::channel::clock::timestamp(record.created_ms)),
    })
}

/// The email channel, as the registry lists it.
impl crate::Registered for Email {
    /// Its SMTP server (`--smtp-url`, `--smtp-password-file`, `--email-from`: none,
    /// or the URL and the sender together).
    fn build(setup: &crate::Setup<'_>) -> anyhow::Result<Self> {
        let config = setup.config;
        let smtp = match (&config.smtp_url, &config.email_from) {
            (Some(url), Some(from)) => Some(SmtpConfig {
                url,
                password: config
                    .smtp_password_file
                    .as_deref()
                    .map(smtp_password)
                    .transpose()?,
                from,
                timeout: setup.timeout,
            }),
            (None, None) => None,
            _ => anyhow::bail!("--smtp-url and --email-from go together"),
        };
        Self::new(smtp, setup.links()).map_err(|e| anyhow::anyhow!(e))
    }

    /// The pages of signed links: email's, and the actions of ntfy's pushes, each
    /// verified by its MAC.
    fn inbound(
        &self,
        hooks: &crate::delivery::Hooks,
        questions: &crate::resolve::Questions,
    ) -> Option<std::sync::Arc<dyn crate::ingress::Ingress>> {
        let pages = pages::Links::new(hooks.clone(), questions.clone());
        Some(std::sync::Arc::new(pages))
    }
}

/// The SMTP password in the file at `path` (`--smtp-password-file`).
fn smtp_password(path: &std::path::Path) -> anyhow::Result<Secret> {
    use anyhow::Context as _;
    let (bytes, warning) = crate::secret::read_file(path)
        .with_context(|| format!("--smtp-password-file {}", path.display()))?;
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--smtp-password-file is not text"))?;
    Ok(Secret::new(text.trim_end()))
}

pub const ABOUT: About = About {
    name: EMAIL_CHANNEL,
    noun: "email route",
    answered_through: true,
    knows_who: true,
};

#[async_trait::async_trait]
impl Channel for Email {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn holds(&self, record: &EndpointRecord) -> bool {
        record.email().is_some()
    }

    async fn deliver(
        &self,
        out: &Outbound<'_>,
        connection: &EndpointRecord,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let target = connection.email().ok_or("not an email route")?;
        self.attempt(out.store, connection, target, delivery).await
    }
}

#[async_trait::async_trait]
impl Connector for Email {
    type Request = ConnectEmailRequest;
    type Connection = EmailRoute;

    const CONNECTED: &'static str = "email.connected";
    const DISCONNECTED: &'static str = "email.disconnected";

    async fn connect(
        &self,
        tenant: &str,
        request: ConnectEmailRequest,
        checks: &Checks<'_>,
    ) -> Result<EndpointRecord, Error> {
        self.checked_record(tenant, request, checks.limits)
    }

    fn shown(&self, record: &EndpointRecord, _fresh: bool) -> Option<EmailRoute> {
        route_of(record)
    }

    fn details(&self, connection: &EmailRoute) -> serde_json::Value {
        serde_json::json!({ "id": connection.id, "to": connection.to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smtp_user_comes_from_the_url() {
        assert_eq!(
            user_of("smtp://ana@mail.example.com:587").as_deref(),
            Some("ana")
        );
        assert_eq!(
            user_of("smtps://a%40b.c:pw@mail:465/x").as_deref(),
            Some("a@b.c")
        );
        assert_eq!(user_of("smtp://mail.example.com"), None);
    }

    #[test]
    fn message_ids_are_stable_per_ask_recipient_and_mail() {
        let id = message_id("em_1", "r", 0, "asked");
        assert_eq!(id, message_id("em_1", "r", 0, "asked"));
        assert_ne!(id, message_id("em_1", "r", 1, "asked"));
        assert_ne!(id, message_id("em_1", "r", 0, "resolved"));
        assert!(id.starts_with('<') && id.ends_with("@askgate>"));
    }
}
