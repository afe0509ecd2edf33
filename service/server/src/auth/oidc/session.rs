//! The console session a sign-in ends in: who signed in, in which tenant, with which
//! roles and groups, until when, and the CSRF token the page must send back, sealed
//! (AES-256-GCM with the server's key) into an HttpOnly, SameSite=Strict cookie.
//! Nothing is stored: any node with the same key opens it, until it expires.
//!
//! A call carrying the cookie is taken only with the session's CSRF token in the
//! `x-askgate-csrf` header: the page reads the token from `GET /console/session`,
//! which no other origin can read; the cookie itself never reaches script.

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use askgate_channels::{sealed::SealingKey, secret::Secret};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64URL};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subtle::ConstantTimeEq as _;

use crate::auth::{Failure, Principal, Role, Validity, parse_roles};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "askgate_session";
/// The header a console session's calls carry its CSRF token in.
pub const CSRF_HEADER: &str = "x-askgate-csrf";
/// Longest cookie value the session may take (browsers keep 4096 bytes a cookie,
/// name and attributes included).
const MAX_COOKIE_BYTES: usize = 3800;
/// What the session is sealed for: a value sealed for anything else does not open.
const SESSION_CONTEXT: &str = "askgate console session v1";

/// A signed-in person's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The ID token's `sub`: the answers' `resolved_by`.
    pub sub: String,
    /// What the console shows (the ID token's `name`, else a username or address).
    pub name: String,
    pub tenant: String,
    pub roles: Vec<String>,
    pub groups: Vec<String>,
    /// Seconds since the epoch at which it ends.
    pub exp: u64,
    /// What calls must send in [`CSRF_HEADER`].
    pub csrf: String,
}

impl Session {
    /// The caller a call with this session is.
    fn principal(&self) -> Result<Principal, Failure> {
        let roles =
            parse_roles(self.roles.iter().map(String::as_str)).map_err(|_| Failure::BadClaims)?;
        Ok(Principal {
            sub: self.sub.clone(),
            tenant: self.tenant.as_str().into(),
            roles,
            sessions: None,
            groups: self.groups.clone(),
            validity: Validity::Until(UNIX_EPOCH + Duration::from_secs(self.exp)),
            console: true,
        })
    }

    /// What `GET /console/session` tells the page.
    pub fn shown(&self) -> serde_json::Value {
        json!({
            "subject": self.sub,
            "name": self.name,
            "tenant": self.tenant,
            "roles": self.roles,
            "groups": self.groups,
            "expires_at": self.exp,
            "csrf": self.csrf,
        })
    }
}

/// Issues and opens console sessions.
pub struct Sessions {
    key: Arc<SealingKey>,
    ttl: Duration,
    random: SystemRandom,
}

/// Who signed in, as the ID token and the role map say.
#[derive(Debug)]
pub struct SignedIn {
    pub sub: String,
    pub name: String,
    pub tenant: String,
    pub roles: Vec<Role>,
    pub groups: Vec<String>,
}

impl Sessions {
    pub fn new(key: Arc<SealingKey>, ttl: Duration) -> Self {
        Self {
            key,
            ttl,
            random: SystemRandom::new(),
        }
    }

    /// The key sessions are sealed with (the sign-in seals its own state with it too).
    pub(super) fn key(&self) -> &SealingKey {
        &self.key
    }

    /// How long a session lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new session for `who`, and its cookie value; an error says why there is none
    /// (too large for a cookie, or the system's random source failed).
    pub fn issue(&self, who: SignedIn) -> Result<(Session, String), String> {
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_add(self.ttl)
            .as_secs();
        let session = Session {
            sub: who.sub,
            name: who.name,
            tenant: who.tenant,
            roles: who.roles.iter().map(|r| r.as_str().to_owned()).collect(),
            groups: who.groups,
            exp,
            csrf: random_token(&self.random)?,
        };
        let json = serde_json::to_string(&session).map_err(|e| e.to_string())?;
        let sealed = self
            .key
            .seal(SESSION_CONTEXT, &Secret::new(json))
            .map_err(|e| e.to_string())?;
        if sealed.len() > MAX_COOKIE_BYTES {
            return Err(format!(
                "the identity provider names more groups than a console session can hold \
                 ({} groups): ask its administrator to send only the groups askgate needs",
                session.groups.len()
            ));
        }
        Ok((session, sealed))
    }

    /// The session a cookie value holds, if it opens with this key and has not ended.
    pub fn open(&self, value: &str) -> Option<Session> {
        if value.len() > MAX_COOKIE_BYTES {
            return None;
        }
        let json = self.key.open(SESSION_CONTEXT, value).ok()?;
        let session: Session = serde_json::from_str(json.expose()).ok()?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        (session.exp > now).then_some(session)
    }

    /// The caller of a call whose headers carry a session cookie: `None` without one
    /// (other credentials decide), else the session's principal, or why it is refused
    /// (ended or not this server's; no or the wrong CSRF token).
    pub fn authenticate(&self, headers: &http::HeaderMap) -> Option<Result<Principal, Failure>> {
        let value = cookie(headers, SESSION_COOKIE)?;
        let Some(session) = self.open(value) else {
            return Some(Err(Failure::Expired));
        };
        let sent = headers.get(CSRF_HEADER).map(http::HeaderValue::as_bytes);
        let matches = sent.is_some_and(|sent| bool::from(sent.ct_eq(session.csrf.as_bytes())));
        Some(match matches {
            true => session.principal(),
            false => Err(Failure::Csrf),
        })
    }
}

/// 32 random bytes, base64url: a CSRF token, a PKCE verifier, a state or a nonce.
pub fn random_token(random: &SystemRandom) -> Result<String, String> {
    let mut bytes = [0u8; 32];
    random
        .fill(&mut bytes)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(B64URL.encode(bytes))
}

/// The value of cookie `name` among the request's `Cookie` headers (HTTP/2 may send
/// one header a cookie).
pub fn cookie<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(n, v)| (n == name).then_some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(ttl: Duration) -> Sessions {
        Sessions::new(Arc::new(SealingKey::ephemeral().expect("a key")), ttl)
    }

    fn ana() -> SignedIn {
        SignedIn {
            sub: "ana".into(),
            name: "Ana Lima".into(),
            tenant: "acme".into(),
            roles: vec![Role::Ui],
            groups: vec!["ops".into()],
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("a name"),
                http::HeaderValue::from_str(value).expect("a value"),
            );
        }
        map
    }

    #[test]
    fn a_session_is_the_console_channel_of_its_person_with_its_csrf_token_only() {
        let sessions = sessions(Duration::from_secs(600));
        let (session, value) = sessions.issue(ana()).expect("a session");
        let cookie = format!("{SESSION_COOKIE}={value}");
        let principal = sessions
            .authenticate(&headers(&[
                ("cookie", &format!("other=1; {cookie}")),
                (CSRF_HEADER, &session.csrf),
            ]))
            .expect("a cookie")
            .expect("accepted");
        assert_eq!(principal.sub, "ana");
        assert_eq!(&*principal.tenant, "acme");
        assert_eq!(principal.roles, vec![Role::Ui]);
        assert_eq!(principal.groups, vec!["ops".to_owned()]);
        assert!(principal.console);
        let without = sessions.authenticate(&headers(&[("cookie", &cookie)]));
        assert_eq!(without, Some(Err(Failure::Csrf)));
        let (other, _) = sessions.issue(ana()).expect("another session");
        let wrong =
            sessions.authenticate(&headers(&[("cookie", &cookie), (CSRF_HEADER, &other.csrf)]));
        assert_eq!(wrong, Some(Err(Failure::Csrf)));
        assert_eq!(
            sessions.authenticate(&headers(&[("cookie", "other=1")])),
            None
        );
    }

    #[test]
    fn another_servers_or_an_altered_session_does_not_open() {
        let ours = sessions(Duration::from_secs(600));
        let theirs = sessions(Duration::from_secs(600));
        let (_, value) = theirs.issue(ana()).expect("a session");
        assert_eq!(ours.open(&value), None);
        let (_, mut value) = ours.issue(ana()).expect("a session");
        assert!(ours.open(&value).is_some());
        let last = value.pop().expect("a character");
        value.push(if last == 'A' { 'B' } else { 'A' });
        assert_eq!(ours.open(&value), None);
        let (session, value) = ours.issue(ana()).expect("a session");
        let refused = ours.authenticate(&headers(&[
            ("cookie", &format!("{SESSION_COOKIE}={value}x")),
            (CSRF_HEADER, &session.csrf),
        ]));
        assert_eq!(refused, Some(Err(Failure::Expired)));
    }

    #[test]
    fn an_ended_session_does_not_open() {
        let sessions = sessions(Duration::ZERO);
        let (_, value) = sessions.issue(ana()).expect("a session");
        assert_eq!(sessions.open(&value), None);
    }

    #[test]
    fn too_many_groups_for_a_cookie_are_refused_at_sign_in() {
        let sessions = sessions(Duration::from_secs(600));
        let mut who = ana();
        who.groups = (0..64).map(|i| format!("{i:0>200}")).collect();
        let error = sessions.issue(who).expect_err("too large");
        assert!(error.contains("more groups"), "{error}");
    }
}
