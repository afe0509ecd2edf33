//! An ID token from the token endpoint, verified (OpenID Connect Core §3.1.3.7): signed
//! by a key of the issuer's set with that key's own algorithm, issued by the issuer,
//! for this client (and, with several audiences, authorized for it: `azp`), not
//! expired, and carrying the nonce of the sign-in that asked for it. Then read into
//! who signed in: subject, name, tenant, groups, and the roles those give.

use jsonwebtoken::{Validation, decode, decode_header, errors::ErrorKind};
use serde_json::{Map, Value};
use subtle::ConstantTimeEq as _;

use super::{OidcConfig, TenantFrom, session::SignedIn};
use crate::{
    auth::jwks::RemoteJwks,
    domain::{approval, validate},
};

/// Longest name shown for a person, in characters.
const MAX_NAME_CHARS: usize = 128;
/// Longest subject taken, in bytes.
const MAX_SUBJECT_BYTES: usize = 256;

/// Why a sign-in did not end in a session: shown on the page the browser lands on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The token is not one to trust (signature, issuer, audience, expiry, nonce).
    #[error("the identity provider's ID token was not accepted: {0}")]
    Token(String),
    /// The token is good, but the person may not use the console.
    #[error("{0}")]
    NotAdmitted(String),
}

/// Verifies `token` and reads who signed in.
pub async fn verify(
    token: &str,
    jwks: &std::sync::Arc<RemoteJwks>,
    config: &OidcConfig,
    nonce: &str,
) -> Result<SignedIn, Refused> {
    let bad = |why: &str| Refused::Token(why.to_owned());
    let header = decode_header(token).map_err(|_| bad("it is malformed"))?;
    let kid = header
        .kid
        .as_deref()
        .ok_or_else(|| bad("it names no key (kid)"))?;
    // A key the set does not hold yet (the provider rotated): fetched again first.
    let (alg, key) = jwks
        .key_fetched(kid)
        .await
        .ok_or_else(|| bad("its key is not in the issuer's key set"))?;
    if header.alg != alg {
        return Err(bad("it is not signed with its key's algorithm"));
    }
    let mut validation = Validation::new(alg);
    validation.leeway = 5;
    validation.set_issuer(&[&config.issuer]);
    validation.set_audience(&[&config.client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let claims = decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| {
            bad(match e.kind() {
                ErrorKind::ExpiredSignature => "it has expired",
                ErrorKind::InvalidIssuer => "another issuer made it",
                ErrorKind::InvalidAudience => "it is for another client",
                ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => {
                    "its signature is not valid"
                }
                _ => "its claims are incomplete",
            })
        })?
        .claims;
    check_azp(&claims, &config.client_id).map_err(bad)?;
    let sent = claims
        .get("nonce")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !bool::from(sent.as_bytes().ct_eq(nonce.as_bytes())) {
        return Err(bad("it is not the answer to this sign-in (nonce)"));
    }
    signed_in(&claims, config)
}

/// With several audiences the token must say it was issued to this client (`azp`); a
/// present `azp` must name it.
fn check_azp(claims: &Map<String, Value>, client_id: &str) -> Result<(), &'static str> {
    let several = claims
        .get("aud")
        .and_then(Value::as_array)
        .is_some_and(|aud| aud.len() > 1);
    match claims.get("azp").and_then(Value::as_str) {
        Some(azp) if azp != client_id => Err("it was issued to another client (azp)"),
        None if several => Err("it has several audiences and no azp"),
        _ => Ok(()),
    }
}

/// Who the verified `claims` name, with the roles their groups give.
fn signed_in(claims: &Map<String, Value>, config: &OidcConfig) -> Result<SignedIn, Refused> {
    let bad = |why: String| Refused::Token(why);
    let text = |name: &str| claims.get(name).and_then(Value::as_str);
    let sub = text("sub").unwrap_or_default();
    approval::credential_subject(sub).map_err(|e| bad(format!("its sub {e}")))?;
    if sub.len() > MAX_SUBJECT_BYTES || sub.chars().any(char::is_control) {
        return Err(bad(format!(
            "its sub is longer than {MAX_SUBJECT_BYTES} bytes or holds control characters"
        )));
    }
    let groups = crate::auth::jwt::groups_of(claims.get(&config.groups_claim)).map_err(|_| {
        bad(format!(
            "its {} claim is not a list of group names (at most {} of at most {} bytes)",
            config.groups_claim,
            crate::auth::MAX_GROUPS,
            crate::auth::MAX_GROUP_BYTES
        ))
    })?;
    let tenant = match &config.tenant {
        TenantFrom::Fixed(tenant) => tenant.clone(),
        TenantFrom::Claim(claim) => {
            let tenant = text(claim).ok_or_else(|| bad(format!("it has no {claim} claim")))?;
            validate::tenant_name(tenant)
                .map_err(|e| bad(format!("its {claim} claim is not a tenant name: {e}")))?;
            tenant.to_owned()
        }
    };
    let name = ["name", "preferred_username", "email"]
        .iter()
        .find_map(|claim| text(claim).filter(|v| !v.trim().is_empty()))
        .unwrap_or(sub);
    let name: String = name
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let roles = config.role_map.roles(&groups);
    if roles.is_empty() {
        return Err(Refused::NotAdmitted(format!(
            "{name} signed in, but is in none of the groups this console admits: ask an \
             administrator to add you to one of them"
        )));
    }
    Ok(SignedIn {
        sub: sub.to_owned(),
        name,
        tenant,
        roles,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::auth::{Role, oidc::RoleMap};

    fn config(tenant: TenantFrom) -> OidcConfig {
        OidcConfig {
            issuer: "https://idp.example".into(),
            client_id: "askgate".into(),
            client_secret_file: None,
            tenant,
            groups_claim: "groups".into(),
            role_map: RoleMap::parse(&["ops=ui".into(), "sre=admin".into()]).expect("a map"),
            session_ttl: Duration::from_secs(3600),
        }
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().expect("an object").clone()
    }

    #[test]
    fn claims_name_the_person_their_tenant_and_roles() {
        let who = signed_in(
            &claims(json!({"sub": "u1", "name": "Ana", "groups": ["ops", "x"], "org": "acme"})),
            &config(TenantFrom::Claim("org".into())),
        )
        .expect("admitted");
        assert_eq!((who.sub.as_str(), who.name.as_str()), ("u1", "Ana"));
        assert_eq!(who.tenant, "acme");
        assert_eq!(who.roles, vec![Role::Ui]);
        assert_eq!(who.groups, vec!["ops".to_owned(), "x".to_owned()]);
        let by_email = signed_in(
            &claims(json!({"sub": "u2", "email": "bo@example.com", "groups": "sre"})),
            &config(TenantFrom::Fixed("acme".into())),
        )
        .expect("admitted");
        assert_eq!(by_email.name, "bo@example.com");
        assert_eq!(by_email.roles, vec![Role::Admin]);
    }

    #[test]
    fn a_person_outside_the_mapped_groups_or_a_bad_claim_is_refused() {
        let fixed = config(TenantFrom::Fixed("acme".into()));
        let outside = signed_in(&claims(json!({"sub": "u3", "groups": ["finance"]})), &fixed);
        assert!(
            matches!(outside, Err(Refused::NotAdmitted(_))),
            "{outside:?}"
        );
        let reserved = signed_in(
            &claims(json!({"sub": "askgate:x", "groups": ["ops"]})),
            &fixed,
        );
        assert!(matches!(reserved, Err(Refused::Token(_))));
        let by_claim = config(TenantFrom::Claim("org".into()));
        let no_tenant = signed_in(&claims(json!({"sub": "u", "groups": ["ops"]})), &by_claim);
        assert!(matches!(no_tenant, Err(Refused::Token(ref why)) if why.contains("no org claim")));
        let bad_tenant = signed_in(
            &claims(json!({"sub": "u", "groups": ["ops"], "org": "a b"})),
            &by_claim,
        );
        assert!(matches!(bad_tenant, Err(Refused::Token(_))));
        let bad_groups = signed_in(&claims(json!({"sub": "u", "groups": {"a": 1}})), &fixed);
        assert!(matches!(bad_groups, Err(Refused::Token(_))));
    }

    #[test]
    fn several_audiences_need_this_clients_azp() {
        let several = claims(json!({"aud": ["askgate", "other"]}));
        assert!(check_azp(&several, "askgate").is_err());
        let mut authorized = several.clone();
        authorized.insert("azp".into(), json!("askgate"));
        assert!(check_azp(&authorized, "askgate").is_ok());
        let other = claims(json!({"aud": "askgate", "azp": "other"}));
        assert!(check_azp(&other, "askgate").is_err());
        assert!(check_azp(&claims(json!({"aud": "askgate"})), "askgate").is_ok());
    }
}
