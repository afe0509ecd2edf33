//! Signed links (docs/email.md): what an email's links carry. A link names one ask of
//! one tenant, the route that sent it, whom it was sent to and, for an option's link,
//! the option; it expires with the ask. It is signed with the server's key (HMAC-SHA256
//! under the key's derived MAC key, domain-separated from every other use of it), so
//! nobody without the key can make one or change what it names, and whoever opens it
//! is taken to be the person it was sent to.

use std::sync::Arc;

use askgate_proto::v1::Requested;
use serde::{Deserialize, Serialize};

use crate::{
    backend::hooks::records::EndpointRecord,
    domain::{
        Error,
        model::{EMAIL_CHANNEL, NTFY_CHANNEL},
    },
    sealed::SealingKey,
};

/// Where a link's page is, under the public URL.
pub const LINK_PATH: &str = "/answer/";
/// A link of an ask without a lifetime of its own lasts this long at most.
const MAX_LINK_LIFE_MS: u64 = 7 * 24 * 3600 * 1000;

/// What every signed link's MAC input starts with: no other MAC of the key can be taken
/// for a link's.
const DOMAIN: &[u8] = b"askgate link v1\x1f";
/// The same for a link that adds an address to a person ([`IdentityLink`]): neither
/// kind of link can be taken for the other.
const IDENTITY_DOMAIN: &[u8] = b"askgate identity link v1\x1f";
/// Where an identity link's page is, under the public URL.
pub const IDENTITY_PATH: &str = "/link/";
/// Bytes of a token taken at most (a link's own are well within).
pub const MAX_TOKEN_BYTES: usize = 2048;

/// What a link names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The tenant, the route (an endpoint's id), the session and the ask.
    #[serde(rename = "t")]
    pub tenant: String,
    #[serde(rename = "e")]
    pub endpoint: String,
    #[serde(rename = "s")]
    pub session: String,
    #[serde(rename = "r")]
    pub rpc: String,
    /// The option of the ask's only question this link chooses, if it is an option's.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub option: Option<usize>,
    /// Who it was sent to: the resolver of what it answers (`email:ana@example.com`).
    #[serde(rename = "w")]
    pub who: String,
    /// When it stops working (ms since the epoch).
    #[serde(rename = "x")]
    pub expires_ms: u64,
}

impl Link {
    /// A link to `requested` of `route`, for `who` (`email:<address>`, `ntfy:<topic>`),
    /// choosing `option` if given; it expires with the ask, after 7 days at most.
    pub fn new(
        route: &EndpointRecord,
        requested: &Requested,
        who: String,
        option: Option<usize>,
        now_ms: u64,
    ) -> Self {
        let expires_ms = requested
            .expires_at
            .as_ref()
            .map(|t| u64::try_from(t.seconds).unwrap_or(0).saturating_mul(1000))
            .filter(|&ms| ms > 0)
            .unwrap_or(u64::MAX)
            .min(now_ms + MAX_LINK_LIFE_MS);
        Self {
            tenant: route.tenant.clone(),
            endpoint: route.id.clone(),
            session: requested.session_id.clone(),
            rpc: requested.rpc_id.clone(),
            option,
            who,
            expires_ms,
        }
    }

    /// The channel the link answers through: its person's prefix (`email:ana@…`,
    /// `ntfy:nt_…`); a link whose person names another is not one of askgate's.
    fn channel_of(who: &str) -> Option<&'static str> {
        match who.split_once(':')?.0 {
            EMAIL_CHANNEL => Some(EMAIL_CHANNEL),
            NTFY_CHANNEL => Some(NTFY_CHANNEL),
            _ => None,
        }
    }

    /// The channel the link answers through (`email`, `ntfy`); none for a person of
    /// another, which [`Link::verify`] refuses.
    pub fn channel(&self) -> Option<&'static str> {
        Self::channel_of(&self.who)
    }

    /// The link as a URL path segment: base64url of its JSON, a dot, and the hex MAC.
    pub fn sign(&self, key: &SealingKey) -> String {
        use base64::Engine as _;
        let json = serde_json::to_vec(self).unwrap_or_default();
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&json);
        format!("{payload}.{}", mac(key, DOMAIN, payload.as_bytes()))
    }

    /// The link a token names, if the token is one `sign` made with `key` and it has
    /// not expired at `now_ms`; else why not.
    pub fn verify(key: &SealingKey, token: &str, now_ms: u64) -> Result<Self, &'static str> {
        const FORGED: &str = "this link is not one of askgate's";
        if token.len() > MAX_TOKEN_BYTES {
            return Err(FORGED);
        }
        let link: Self = opened(key, DOMAIN, token).ok_or(FORGED)?;
        if Self::channel_of(&link.who).is_none() {
            return Err(FORGED);
        }
        match link.expires_ms > now_ms {
            true => Ok(link),
            false => Err("this link has expired"),
        }
    }

    /// The key of the note that the link was used (answered with).
    pub fn used_key(token: &str) -> String {
        use sha2::Digest as _;
        format!(
            "link-used:{}",
            hex::encode(sha2::Sha256::digest(token.as_bytes()))
        )
    }
}

/// What signs links and where they point: the server's key and public URL.
#[derive(Clone)]
pub struct Signer {
    key: Option<Arc<SealingKey>>,
    public: Option<String>,
}

impl Signer {
    pub fn new(key: Option<Arc<SealingKey>>, public: Option<&str>) -> Self {
        Self {
            key,
            public: public.map(str::to_owned),
        }
    }

    /// Whether links can be made, or which flag the server lacks.
    pub fn ready(&self) -> Result<(), Error> {
        let missing = |what: &str| {
            Error::PermissionDenied(format!(
                "this server makes no links to answer: start every node with {what}"
            ))
        };
        self.public
            .as_ref()
            .ok_or_else(|| missing("--public-url"))?;
        self.key
            .as_ref()
            .ok_or_else(|| missing("--secret-key-file"))?;
        Ok(())
    }

    /// The URL of `link`, signed.
    pub fn url(&self, link: &Link) -> Result<String, String> {
        match (&self.key, &self.public) {
            (Some(key), Some(public)) => Ok(format!("{public}{LINK_PATH}{}", link.sign(key))),
            _ => Err(
                "this server makes no links: it needs --public-url and --secret-key-file".into(),
            ),
        }
    }

    /// The console's inbox, where an ask a link may not answer is answered.
    pub fn console(&self) -> String {
        format!(
            "{}/console/#/inbox",
            self.public.as_deref().unwrap_or_default()
        )
    }

    /// The link a token of this server's names, if it is valid at `now_ms`.
    pub fn verify(&self, token: &str, now_ms: u64) -> Result<Link, &'static str> {
        let key = self.key.as_deref().ok_or("this server signs no links")?;
        Link::verify(key, token, now_ms)
    }

    /// The URL of an identity link, signed.
    pub fn identity_url(&self, link: &IdentityLink) -> Result<String, Error> {
        self.ready()?;
        let (Some(key), Some(public)) = (&self.key, &self.public) else {
            return Err(Error::Internal("ready, yet no key or public URL".into()));
        };
        let json = serde_json::to_vec(link).unwrap_or_default();
        let payload =
            base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &json);
        let mac = mac(key, IDENTITY_DOMAIN, payload.as_bytes());
        Ok(format!("{public}{IDENTITY_PATH}{payload}.{mac}"))
    }

    /// The identity link a token of this server's names, if it is valid at `now_ms`.
    pub fn verify_identity(&self, token: &str, now_ms: u64) -> Result<IdentityLink, &'static str> {
        const FORGED: &str = "this link is not one of askgate's";
        let key = self.key.as_deref().ok_or("this server signs no links")?;
        let link: IdentityLink = opened(key, IDENTITY_DOMAIN, token).ok_or(FORGED)?;
        match link.expires_ms > now_ms {
            true => Ok(link),
            false => Err("this link has expired"),
        }
    }
}

/// A link mailed to an address so that it joins a person (docs/approvals.md
/// "People"): whoever opens it and confirms reads that mailbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityLink {
    #[serde(rename = "t")]
    pub tenant: String,
    /// The one-time code of the person who asked (`People.StartLink`).
    #[serde(rename = "c")]
    pub code: String,
    /// The address it was mailed to: the identity it adds (`email:<address>`).
    #[serde(rename = "a")]
    pub address: String,
    #[serde(rename = "x")]
    pub expires_ms: u64,
}

/// What a token signed under `domain` holds, if its MAC is the key's (constant time).
fn opened<T: serde::de::DeserializeOwned>(
    key: &SealingKey,
    domain: &[u8],
    token: &str,
) -> Option<T> {
    use base64::Engine as _;
    if token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let (payload, given) = token.split_once('.')?;
    let expected = mac(key, domain, payload.as_bytes());
    let same: bool = subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), given.as_bytes()).into();
    if !same {
        return None;
    }
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&json).ok()
}

fn mac(key: &SealingKey, domain: &[u8], payload: &[u8]) -> String {
    let mut data = domain.to_vec();
    data.extend_from_slice(payload);
    key.mac(&data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            tenant: "acme".into(),
            endpoint: "em_1".into(),
            session: "ops/1".into(),
            rpc: "r1".into(),
            option: Some(1),
            who: "email:ana@example.com".into(),
            expires_ms: 2_000,
        }
    }

    #[test]
    fn a_link_verifies_only_with_its_key_unchanged_and_unexpired() {
        let key = SealingKey::new(&[7; 32]).expect("a key");
        let other = SealingKey::new(&[8; 32]).expect("a key");
        let token = link().sign(&key);
        assert_eq!(Link::verify(&key, &token, 1_000), Ok(link()));
        assert!(Link::verify(&other, &token, 1_000).is_err());
        assert_eq!(
            Link::verify(&key, &token, 2_000),
            Err("this link has expired")
        );
        // Another payload under the same MAC: refused.
        let (_, mac) = token.split_once('.').expect("a dot");
        let changed = Link {
            option: Some(0),
            ..link()
        }
        .sign(&key);
        let (payload, _) = changed.split_once('.').expect("a dot");
        assert!(Link::verify(&key, &format!("{payload}.{mac}"), 1_000).is_err());
        for bad in ["", ".", "abc", &"a".repeat(MAX_TOKEN_BYTES + 1)] {
            assert!(Link::verify(&key, bad, 1_000).is_err(), "{bad}");
        }
        // Signed, but for a person of a channel links do not answer through: refused,
        // not taken for an email.
        for who in ["slack:U1", "ana@example.com", "console:ana"] {
            let token = Link {
                who: who.into(),
                ..link()
            }
            .sign(&key);
            assert!(Link::verify(&key, &token, 1_000).is_err(), "{who}");
        }
        // The answers' MAC of the same bytes is another: the domains are apart.
        assert_ne!(
            key.mac(token.split_once('.').expect("a dot").0.as_bytes()),
            mac
        );
    }
}
