//! Who is calling: credentials (`authorization: Bearer ...`) to a [`Principal`] with a
//! tenant, roles and optional session patterns, and what each role may do.
//!
//! The tenant comes from the credential only, never from a request field; every key
//! below is (tenant, session), so another tenant's session simply does not exist for
//! the caller.

mod gate;
pub mod jwks;
pub mod jwt;
pub mod keys;
pub mod oidc;
pub use askgate_channels::{sealed, secret};

pub use gate::Gate;

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::WhoAmIResponse;
use tonic::metadata::MetadataMap;

use crate::domain::{DEFAULT_TENANT, Error};

/// What a credential may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Ask and Attach.
    Agent,
    /// Subscribe, Answer, Cancel, ListPending.
    Ui,
    /// Everything, within its tenant.
    Admin,
}

impl Role {
    /// The role's name in credentials.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Ui => "ui",
            Self::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "agent" => Some(Self::Agent),
            "ui" => Some(Self::Ui),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }
}

/// The RPCs, as far as authorization is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Ask,
    /// Giving up on one's own ask.
    Abort,
    Attach,
    Subscribe,
    /// `all_sessions`: a credential limited to some sessions sees only those.
    SubscribeAll,
    Answer,
    Cancel,
    ListPending,
    /// The channels' admin services (`Webhooks`, `Slack`, ...): the whole tenant's
    /// connections and deliveries.
    ManageWebhooks,
    /// The `Audit` service: the whole tenant's decisions and admin changes.
    ExportAudit,
    /// Using up a receipt of the tenant before its action runs (the executor: agent
    /// or admin).
    ConsumeReceipt,
    /// Who the caller is: any role may ask.
    WhoAmI,
    /// A code that links a channel identity to the caller's own person.
    LinkIdentity,
}

impl Action {
    fn role(self) -> Option<Role> {
        Some(match self {
            Self::Ask | Self::Abort | Self::Attach | Self::ConsumeReceipt => Role::Agent,
            Self::ManageWebhooks | Self::ExportAudit => Role::Admin,
            Self::WhoAmI => return None,
            _ => Role::Ui,
        })
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Who: recorded as `resolved_by` of what it resolves.
    pub sub: String,
    pub tenant: Arc<str>,
    pub roles: Vec<Role>,
    /// Session patterns (`*` matches any run of characters); `None`: every session.
    pub sessions: Option<Vec<String>>,
    /// The groups the credential names ([`groups`]): what an ask's approvers may name.
    pub groups: Vec<String>,
    /// How long the credential stays good: a stream opened with it ends then.
    pub validity: Validity,
    /// A console session of the identity provider's sign-in (`--oidc-issuer`): what
    /// the `console` channel means on a server that has one.
    pub console: bool,
}

/// Most groups one credential may name.
pub const MAX_GROUPS: usize = 64;
/// Longest group name, in bytes.
pub const MAX_GROUP_BYTES: usize = 256;

/// The groups a credential names, checked: at most [`MAX_GROUPS`], each 1 to
/// [`MAX_GROUP_BYTES`] bytes without control characters; repeats dropped.
pub fn groups(named: Vec<String>) -> Result<Vec<String>, String> {
    if named.len() > MAX_GROUPS {
        return Err(format!("at most {MAX_GROUPS} groups, not {}", named.len()));
    }
    let mut groups: Vec<String> = Vec::with_capacity(named.len());
    for group in named {
        if group.is_empty() || group.len() > MAX_GROUP_BYTES || group.chars().any(char::is_control)
        {
            return Err(format!(
                "a group is 1 to {MAX_GROUP_BYTES} bytes without control characters"
            ));
        }
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    Ok(groups)
}

/// How long a credential stays good, for the long-lived streams opened with it
/// (Subscribe, Attach), which must not outlive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validity {
    /// No credential (authentication is off).
    Always,
    /// A token, until its `exp`.
    Until(SystemTime),
    /// An API key, while the keys file lists it (by its SHA-256) for this principal.
    WhileListed([u8; 32]),
}

impl Principal {
    /// The caller when authentication is off: every role in the default tenant.
    pub fn anonymous() -> Self {
        Self {
            sub: "anonymous".into(),
            tenant: DEFAULT_TENANT.into(),
            // Every role, said as such (WhoAmI lists them), as docs/operations.md does.
            roles: vec![Role::Agent, Role::Ui, Role::Admin],
            sessions: None,
            groups: Vec::new(),
            validity: Validity::Always,
            console: false,
        }
    }

    /// What the `WhoAmI` RPC tells the caller about itself.
    pub fn who_am_i(&self) -> WhoAmIResponse {
        WhoAmIResponse {
            tenant: self.tenant.to_string(),
            subject: self.sub.clone(),
            roles: self.roles.iter().map(|r| r.as_str().to_owned()).collect(),
            sessions: self.sessions.clone().unwrap_or_default(),
            every_session: self.sessions.is_none(),
            expires_at: match self.validity {
                Validity::Until(at) => Some(prost_types::Timestamp::from(at)),
                Validity::Always | Validity::WhileListed(_) => None,
            },
            groups: self.groups.clone(),
        }
    }

    /// Checks that this caller may do `action` on `session` (empty for none).
    pub fn authorize(&self, action: Action, session: &str) -> Result<(), Error> {
        if let Some(role) = action.role()
            && !self.roles.iter().any(|r| *r == role || *r == Role::Admin)
        {
            return Err(Error::PermissionDenied(format!(
                "this call needs the {} role",
                role.as_str()
            )));
        }
        match (&self.sessions, action) {
            (None, _) | (Some(_), Action::Attach | Action::SubscribeAll | Action::WhoAmI) => Ok(()),
            (Some(_), Action::ManageWebhooks) => Err(Error::PermissionDenied(
                "webhooks see every session: they need a credential that is not limited to \
                 some sessions"
                    .into(),
            )),
            (Some(_), Action::ExportAudit) => Err(Error::PermissionDenied(
                "the audit log covers every session: it needs a credential that is not \
                 limited to some sessions"
                    .into(),
            )),
            (Some(patterns), _) if patterns.iter().any(|p| matches(p, session)) => Ok(()),
            (Some(_), _) => Err(Error::PermissionDenied(
                "this credential may not use that session".into(),
            )),
        }
    }
}

/// Glob match with `*` only: `team-a/*` matches `team-a/x` and `team-a/x/y`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Why a credential was refused: the label of the `auth_failures_total` metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    Missing,
    Malformed,
    UnknownKey,
    BadSignature,
    Expired,
    NotYetValid,
    WrongIssuer,
    WrongAudience,
    BadClaims,
    /// The subject is empty, or one the server keeps for itself (`askgate:…`).
    ReservedSubject,
    /// The credential names a tenant that is not a valid tenant name.
    BadTenant,
    /// A stream's credential expired or was revoked while the stream was open.
    Revoked,
    /// A console session's call without the session's CSRF header, or with another's.
    Csrf,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::UnknownKey => "unknown_key",
            Self::BadSignature => "bad_signature",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::WrongIssuer => "wrong_issuer",
            Self::WrongAudience => "wrong_audience",
            Self::BadClaims => "bad_claims",
            Self::ReservedSubject => "reserved_subject",
            Self::BadTenant => "bad_tenant",
            Self::Revoked => "revoked",
            Self::Csrf => "csrf",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Missing => "send a credential as `authorization: Bearer <token>`",
            Self::Malformed => "the credential is malformed",
            Self::UnknownKey => "the API key is not valid",
            Self::BadSignature => "the token's signature is not valid",
            Self::Expired => "the token has expired",
            Self::NotYetValid => "the token is not valid yet",
            Self::WrongIssuer => "the token's issuer is not accepted",
            Self::WrongAudience => "the token's audience is not accepted",
            Self::BadClaims => "the token's claims are incomplete",
            Self::ReservedSubject => {
                "the token's sub is empty or begins with askgate:, which the server keeps for itself"
            }
            Self::BadTenant => {
                "the credential's tenant is not a valid tenant name (1-64 characters of [A-Za-z0-9._-])"
            }
            Self::Revoked => "the credential of this stream has expired or was revoked",
            Self::Csrf => {
                "a console session's call needs the session's x-askgate-csrf header (the console \
                 sends it; other pages cannot read it)"
            }
        }
    }

    pub fn into_error(self) -> Error {
        Error::Unauthenticated(self.message().into())
    }
}

/// How credentials are checked.
pub enum Authenticator {
    /// Every caller is [`Principal::anonymous`].
    None,
    Keys(keys::KeyStore),
    Jwt(jwt::JwtVerifier),
}

impl Authenticator {
    /// The caller of a request, from its `authorization` metadata.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<Principal, Failure> {
        if let Self::None = self {
            return Ok(Principal::anonymous());
        }
        let header = metadata.get("authorization").ok_or(Failure::Missing)?;
        let header = header.to_str().map_err(|_| Failure::Malformed)?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Failure::Malformed)?;
        match self {
            Self::None => Ok(Principal::anonymous()),
            Self::Keys(store) => store.authenticate(token),
            Self::Jwt(verifier) => verifier.authenticate(token),
        }
    }

    /// Re-reads the keys file (SIGHUP); other modes have nothing to reload.
    pub fn reload(&self) -> anyhow::Result<()> {
        match self {
            Self::Keys(store) => store.reload(),
            _ => Ok(()),
        }
    }

    /// Completes when `principal`'s credential is no longer good: at a token's `exp`,
    /// or when a reload of the keys file no longer lists the key for the same caller.
    /// None for a credential that cannot lapse (nothing to watch on every message of
    /// its stream). A long-lived stream ends with UNAUTHENTICATED when it does.
    pub fn lapsed(
        &self,
        principal: &Principal,
    ) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
        Some(match (&principal.validity, self) {
            (Validity::Always, _) => return None,
            (Validity::Until(exp), _) => {
                let left = exp
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO);
                Box::pin(tokio::time::sleep(left))
            }
            (Validity::WhileListed(hash), Self::Keys(store)) => {
                Box::pin(store.unlisted(*hash, principal.clone()))
            }
            // A key's principal from a store that is not in use (cannot happen): it
            // is not listed.
            (Validity::WhileListed(_), _) => Box::pin(std::future::ready(())),
        })
    }
}

/// Parses a comma-separated or repeated roles list.
pub fn parse_roles<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Vec<Role>, String> {
    names
        .into_iter()
        .map(|n| Role::parse(n.trim()).ok_or_else(|| format!("unknown role {n:?}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(roles: &[Role], sessions: Option<&[&str]>) -> Principal {
        Principal {
            sub: "s".into(),
            tenant: "t".into(),
            roles: roles.to_vec(),
            sessions: sessions.map(|s| s.iter().map(|p| (*p).to_owned()).collect()),
            groups: Vec::new(),
            validity: Validity::Always,
            console: false,
        }
    }

    #[test]
    fn roles_allow_their_calls_only() {
        let agent = principal(&[Role::Agent], None);
        let ui = principal(&[Role::Ui], None);
        let admin = principal(&[Role::Admin], None);
        for action in [Action::Ask, Action::Abort, Action::Attach] {
            assert!(agent.authorize(action, "s").is_ok());
            assert!(ui.authorize(action, "s").is_err());
            assert!(admin.authorize(action, "s").is_ok());
        }
        for action in [
            Action::Subscribe,
            Action::SubscribeAll,
            Action::Answer,
            Action::Cancel,
            Action::ListPending,
        ] {
            assert!(agent.authorize(action, "s").is_err(), "{action:?}");
            assert!(ui.authorize(action, "s").is_ok());
            assert!(admin.authorize(action, "s").is_ok());
        }
        let denied = ui.authorize(Action::ManageWebhooks, "").expect_err("ui");
        assert_eq!(
            denied.to_string(),
            "permission denied: this call needs the admin role"
        );
        assert!(agent.authorize(Action::ManageWebhooks, "").is_err());
        assert!(admin.authorize(Action::ManageWebhooks, "").is_ok());
        let limited_admin = principal(&[Role::Admin], Some(&["team-a/*"]));
        assert!(limited_admin.authorize(Action::ManageWebhooks, "").is_err());
    }

    #[test]
    fn session_patterns_limit_sessions() {
        let limited = principal(&[Role::Ui], Some(&["team-a/*", "solo"]));
        assert!(limited.authorize(Action::Answer, "team-a/x").is_ok());
        assert!(limited.authorize(Action::Answer, "solo").is_ok());
        let denied = limited
            .authorize(Action::Answer, "team-b/x")
            .expect_err("other session");
        assert_eq!(denied.reason(), "PERMISSION_DENIED");
        // all_sessions is filtered to the patterns (Questions::subscribe).
        assert!(limited.authorize(Action::SubscribeAll, "").is_ok());
        let agent = principal(&[Role::Agent], Some(&["solo"]));
        assert!(agent.authorize(Action::WhoAmI, "").is_ok());
        assert!(agent.authorize(Action::SubscribeAll, "").is_err());
    }

    #[test]
    fn glob_matching() {
        for (pattern, text, expected) in [
            ("*", "", true),
            ("*", "anything", true),
            ("a", "a", true),
            ("a", "ab", false),
            ("a*", "abc", true),
            ("*c", "abc", true),
            ("a*c", "abbbc", true),
            ("a*c", "ab", false),
            ("a*b*c", "axbyc", true),
            ("a*b*c", "axcyb", false),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(matches(pattern, text), expected, "{pattern} ~ {text}");
        }
    }
}
