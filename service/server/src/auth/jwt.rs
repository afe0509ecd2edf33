//! JWT bearer tokens (HS256, RS256, ES256) through the `jsonwebtoken` crate. The key
//! comes from a secret file (HS256), a PEM public key (RS256 or ES256), or a JWKS file
//! or URL (chosen by the token's `kid`). `exp` is required and checked, `nbf` when
//! present; `iss` and `aud`, when configured, are required and must match (`aud` may be
//! one string or an array holding the configured audience, RFC 7519 §4.1.3). Claims:
//! `sub`, `tenant` (a valid tenant name), `roles`, optional `sessions` (patterns).

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use anyhow::{Context as _, bail};
use jsonwebtoken::{
    Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, decode_header,
    errors::ErrorKind,
};
use serde::{Deserialize, Serialize};

use super::{
    Failure, Principal, Role, Validity,
    jwks::{self, KeysByKid, RemoteJwks},
    parse_roles,
};
use crate::domain::{approval, validate};

/// The claims askgate reads (and `askgate token` writes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub tenant: String,
    pub roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<Audience>,
}

/// The `aud` claim: one audience or several (RFC 7519 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl From<&str> for Audience {
    fn from(audience: &str) -> Self {
        Self::One(audience.to_owned())
    }
}

/// Where the verification key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// HS256 with the file's bytes (trailing newline trimmed) as the secret.
    SecretFile(std::path::PathBuf),
    /// RS256 or ES256, by the PEM's key type.
    PublicKeyFile(std::path::PathBuf),
    /// A JSON Web Key Set; the token's `kid` picks the key.
    JwksFile(std::path::PathBuf),
    /// A JSON Web Key Set at a URL (the identity provider's `jwks_uri`), fetched and
    /// kept fresh ([`super::jwks::RemoteJwks`]); the token's `kid` picks the key.
    JwksUrl(String),
}

enum Keys {
    One(Algorithm, DecodingKey),
    ByKid(KeysByKid),
    Remote(Arc<RemoteJwks>),
}

pub struct JwtVerifier {
    keys: Keys,
    issuer: Option<String>,
    audience: Option<String>,
    /// The claim naming the caller's groups.
    groups_claim: String,
}

/// The claim a token names its caller's groups in, unless `--jwt-groups-claim` says
/// otherwise (the name identity providers use).
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";

/// A token's claims: askgate's own, and the others (among them the groups claim).
#[derive(Deserialize)]
struct Decoded {
    #[serde(flatten)]
    claims: Claims,
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

/// What `askgate token` signs: the claims, and the groups.
#[derive(Serialize)]
struct Minted<'a> {
    #[serde(flatten)]
    claims: &'a Claims,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    groups: &'a [String],
}

/// The groups a groups claim names: a string (one group) or an array of strings.
pub(super) fn groups_of(claim: Option<&serde_json::Value>) -> Result<Vec<String>, Failure> {
    let named = match claim {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(group)) => vec![group.clone()],
        Some(serde_json::Value::Array(groups)) => groups
            .iter()
            .map(|g| g.as_str().map(str::to_owned).ok_or(Failure::BadClaims))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(Failure::BadClaims),
    };
    super::groups(named).map_err(|_| Failure::BadClaims)
}

fn read_secret(path: &Path) -> anyhow::Result<Vec<u8>> {
    let (secret, warning) = super::secret::read_key_file(path)?;
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    if secret.len() < 32 {
        bail!(
            "the HS256 secret in {} must be at least 32 bytes",
            path.display()
        );
    }
    Ok(secret)
}

impl JwtVerifier {
    /// A verifier with the keys of `source` (a key set at a URL is fetched first).
    pub async fn start(
        source: &KeySource,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> anyhow::Result<Self> {
        match source {
            KeySource::JwksUrl(url) => Ok(Self {
                keys: Keys::Remote(RemoteJwks::start(url, "--jwt-jwks-url").await?),
                issuer,
                audience,
                groups_claim: DEFAULT_GROUPS_CLAIM.to_owned(),
            }),
            source => Self::new(source, issuer, audience),
        }
    }

    /// A verifier with the keys of `source`, which names files.
    pub fn new(
        source: &KeySource,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> anyhow::Result<Self> {
        let keys = match source {
            KeySource::SecretFile(path) => Keys::One(
                Algorithm::HS256,
                DecodingKey::from_secret(&read_secret(path)?)?,
            ),
            KeySource::PublicKeyFile(path) => {
                let pem = std::fs::read(path)
                    .with_context(|| format!("failed to read {}", path.display()))?;
                match DecodingKey::from_rsa_pem(&pem) {
                    Ok(key) => Keys::One(Algorithm::RS256, key),
                    Err(_) => Keys::One(
                        Algorithm::ES256,
                        DecodingKey::from_ec_pem(&pem).with_context(|| {
                            format!("{} is neither an RSA nor an EC public key", path.display())
                        })?,
                    ),
                }
            }
            KeySource::JwksFile(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("failed to read {}", path.display()))?;
                let from = path.display().to_string();
                Keys::ByKid(jwks::parse(&text, &from, jwks::Secrets::Allowed)?)
            }
            KeySource::JwksUrl(url) => bail!("the key set at {url} is fetched: use start"),
        };
        Ok(Self {
            keys,
            issuer,
            audience,
            groups_claim: DEFAULT_GROUPS_CLAIM.to_owned(),
        })
    }

    /// The claim that names the caller's groups (`--jwt-groups-claim`).
    pub fn with_groups_claim(mut self, claim: &str) -> Self {
        self.groups_claim = claim.to_owned();
        self
    }

    pub fn authenticate(&self, token: &str) -> Result<Principal, Failure> {
        let header = decode_header(token).map_err(|_| Failure::Malformed)?;
        let fetched;
        let (alg, key) = match &self.keys {
            Keys::One(alg, key) => (*alg, key),
            Keys::ByKid(keys) => {
                let kid = header.kid.as_deref().ok_or(Failure::UnknownKey)?;
                let (alg, key) = keys.get(kid).ok_or(Failure::UnknownKey)?;
                (*alg, key)
            }
            Keys::Remote(jwks) => {
                let kid = header.kid.as_deref().ok_or(Failure::UnknownKey)?;
                fetched = jwks.key(kid).ok_or(Failure::UnknownKey)?;
                (fetched.0, &fetched.1)
            }
        };
        // Only the key's own algorithm: a token may not choose another (or `none`).
        if header.alg != alg {
            return Err(Failure::BadSignature);
        }
        let mut validation = Validation::new(alg);
        validation.validate_nbf = true;
        validation.leeway = 5;
        // A configured issuer or audience is required, not only checked when present.
        let mut required = vec!["exp"];
        match &self.issuer {
            Some(issuer) => {
                validation.set_issuer(&[issuer]);
                required.push("iss");
            }
            None => validation.iss = None,
        }
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&required);
        let decoded = decode::<Decoded>(token, key, &validation)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => Failure::Expired,
                ErrorKind::ImmatureSignature => Failure::NotYetValid,
                ErrorKind::InvalidIssuer => Failure::WrongIssuer,
                ErrorKind::InvalidAudience => Failure::WrongAudience,
                ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => Failure::BadSignature,
                ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => Failure::WrongIssuer,
                ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => Failure::WrongAudience,
                ErrorKind::MissingRequiredClaim(_) | ErrorKind::Json(_) => Failure::BadClaims,
                _ => Failure::Malformed,
            })?
            .claims;
        let groups = groups_of(decoded.other.get(&self.groups_claim))?;
        let claims = decoded.claims;
        let roles =
            parse_roles(claims.roles.iter().map(String::as_str)).map_err(|_| Failure::BadClaims)?;
        if roles.is_empty() {
            return Err(Failure::BadClaims);
        }
        approval::credential_subject(&claims.sub).map_err(|_| Failure::ReservedSubject)?;
        validate::tenant_name(&claims.tenant).map_err(|_| Failure::BadTenant)?;
        Ok(Principal {
            sub: claims.sub,
            tenant: claims.tenant.into(),
            roles,
            sessions: claims.sessions,
            groups,
            // An `exp` beyond what the clock can hold never lapses (rather than panic).
            validity: UNIX_EPOCH
                .checked_add(Duration::from_secs(claims.exp))
                .map_or(Validity::Always, Validity::Until),
            console: false,
        })
    }
}

/// What `askgate token` puts in a token.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    pub sub: String,
    pub tenant: String,
    pub roles: Vec<Role>,
    pub sessions: Option<Vec<String>>,
    /// Written in the `groups` claim.
    pub groups: Vec<String>,
    pub ttl: Duration,
    pub issuer: Option<String>,
    pub audience: Option<String>,
}

/// Mints an HS256 token (for tests and demos) with the secret in `secret_file`.
pub fn mint_hs256(secret_file: &Path, spec: &TokenSpec) -> anyhow::Result<String> {
    validate::tenant_name(&spec.tenant).map_err(|e| anyhow::anyhow!("--tenant: {e}"))?;
    let now = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_secs();
    let claims = Claims {
        sub: spec.sub.clone(),
        tenant: spec.tenant.clone(),
        roles: spec.roles.iter().map(|r| r.as_str().to_owned()).collect(),
        sessions: spec.sessions.clone(),
        exp: now + spec.ttl.as_secs(),
        nbf: Some(now),
        iss: spec.issuer.clone(),
        aud: spec.audience.clone().map(Audience::One),
    };
    super::groups(spec.groups.clone()).map_err(|e| anyhow::anyhow!("--group: {e}"))?;
    let minted = Minted {
        claims: &claims,
        groups: &spec.groups,
    };
    let key = EncodingKey::from_secret(&read_secret(secret_file)?)?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &minted, &key).context("failed to sign")
}

#[cfg(test)]
mod tests {
    use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
    use jsonwebtoken::encode;

    use super::*;
    use crate::auth::{MAX_GROUP_BYTES, MAX_GROUPS};

    fn claims() -> Claims {
        let now = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        Claims {
            sub: "ana".into(),
            tenant: "acme".into(),
            roles: vec!["ui".into()],
            sessions: None,
            exp: now + 60,
            nbf: None,
            iss: None,
            aud: None,
        }
    }

    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir() -> Dir {
        let path = std::env::temp_dir().join(format!("askgate-jwt-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path).expect("dir");
        Dir(path)
    }

    #[test]
    fn es256_public_keys_verify_and_other_algorithms_are_refused() {
        let key = rcgen::KeyPair::generate().expect("P-256 key");
        let dir = dir();
        let public = dir.0.join("public.pem");
        std::fs::write(&public, key.public_key_pem()).expect("write");
        let verifier =
            JwtVerifier::new(&KeySource::PublicKeyFile(public), None, None).expect("verifier");
        let signing = EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).expect("key");
        let token = encode(&Header::new(Algorithm::ES256), &claims(), &signing).expect("sign");
        let principal = verifier.authenticate(&token).expect("valid");
        assert_eq!(
            (principal.sub.as_str(), &*principal.tenant),
            ("ana", "acme")
        );

        // An HS256 token "signed" with the public key as a secret: the classic confusion.
        let confused = EncodingKey::from_secret(key.public_key_pem().as_bytes()).expect("key");
        let token = encode(&Header::new(Algorithm::HS256), &claims(), &confused).expect("sign");
        assert_eq!(verifier.authenticate(&token), Err(Failure::BadSignature));
    }

    const SECRET: &[u8] = b"a-test-secret-that-is-long-enough-for-hs256";

    fn hs256_verifier(issuer: Option<&str>, audience: Option<&str>) -> (Dir, JwtVerifier) {
        let dir = dir();
        let path = dir.0.join("secret");
        std::fs::write(&path, SECRET).expect("write");
        let verifier = JwtVerifier::new(
            &KeySource::SecretFile(path),
            issuer.map(str::to_owned),
            audience.map(str::to_owned),
        )
        .expect("verifier");
        (dir, verifier)
    }

    fn hs256(claims: &Claims) -> String {
        let key = EncodingKey::from_secret(SECRET).expect("key");
        encode(&Header::new(Algorithm::HS256), claims, &key).expect("sign")
    }

    #[test]
    fn a_configured_issuer_and_audience_are_required() {
        let (_dir, verifier) = hs256_verifier(Some("issuer"), Some("askgate"));
        let complete = Claims {
            iss: Some("issuer".into()),
            aud: Some(Audience::One("askgate".into())),
            ..claims()
        };
        assert!(verifier.authenticate(&hs256(&complete)).is_ok());
        let no_iss = Claims {
            iss: None,
            ..complete.clone()
        };
        assert_eq!(
            verifier.authenticate(&hs256(&no_iss)),
            Err(Failure::WrongIssuer)
        );
        let no_aud = Claims {
            aud: None,
            ..complete.clone()
        };
        assert_eq!(
            verifier.authenticate(&hs256(&no_aud)),
            Err(Failure::WrongAudience)
        );
    }

    #[test]
    fn an_audience_array_is_accepted_when_it_holds_the_configured_one() {
        let (_dir, verifier) = hs256_verifier(None, Some("askgate"));
        let with = |aud: &[&str]| Claims {
            aud: Some(Audience::Many(
                aud.iter().map(|a| (*a).to_owned()).collect(),
            )),
            ..claims()
        };
        assert!(
            verifier
                .authenticate(&hs256(&with(&["askgate", "other"])))
                .is_ok()
        );
        assert_eq!(
            verifier.authenticate(&hs256(&with(&["other", "third"]))),
            Err(Failure::WrongAudience)
        );
    }

    #[test]
    fn a_token_naming_an_invalid_tenant_is_refused() {
        let (_dir, verifier) = hs256_verifier(None, None);
        for tenant in ["acme/x", "", "a{b}", &"t".repeat(65)] {
            let token = hs256(&Claims {
                tenant: tenant.into(),
                ..claims()
            });
            assert_eq!(
                verifier.authenticate(&token),
                Err(Failure::BadTenant),
                "{tenant:?}"
            );
        }
    }

    #[test]
    fn a_token_is_valid_until_its_exp() {
        let (_dir, verifier) = hs256_verifier(None, None);
        let claims = claims();
        let principal = verifier.authenticate(&hs256(&claims)).expect("valid");
        assert_eq!(
            principal.validity,
            Validity::Until(UNIX_EPOCH + Duration::from_secs(claims.exp))
        );
    }

    #[test]
    fn an_exp_beyond_the_clock_is_accepted_without_a_panic() {
        let (_dir, verifier) = hs256_verifier(None, None);
        let forever = Claims {
            exp: u64::MAX,
            ..claims()
        };
        let principal = verifier.authenticate(&hs256(&forever)).expect("valid");
        assert_eq!(principal.validity, Validity::Always);
    }

    #[test]
    fn a_jwks_picks_the_key_by_kid() {
        let secret = b"a-jwks-secret-that-is-long-enough-for-hs256";
        let dir = dir();
        let jwks = dir.0.join("jwks.json");
        let set = serde_json::json!({"keys": [
            {"kty": "oct", "kid": "k1", "alg": "HS256", "k": URL_SAFE_NO_PAD.encode(secret)}
        ]});
        std::fs::write(&jwks, set.to_string()).expect("write");
        let verifier = JwtVerifier::new(&KeySource::JwksFile(jwks), None, None).expect("jwks");
        let key = EncodingKey::from_secret(secret).expect("key");
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let token = encode(&header, &claims(), &key).expect("sign");
        assert!(verifier.authenticate(&token).is_ok());
        header.kid = Some("k2".into());
        let token = encode(&header, &claims(), &key).expect("sign");
        assert_eq!(verifier.authenticate(&token), Err(Failure::UnknownKey));
    }

    /// A token of `claims` with `extra` claims beside them.
    fn hs256_with(claims: &Claims, extra: serde_json::Value) -> String {
        let mut all = serde_json::to_value(claims).expect("claims");
        for (name, value) in extra.as_object().expect("an object") {
            all[name] = value.clone();
        }
        let key = EncodingKey::from_secret(SECRET).expect("key");
        encode(&Header::new(Algorithm::HS256), &all, &key).expect("sign")
    }

    #[test]
    fn the_groups_claim_names_the_callers_groups() {
        let (_dir, verifier) = hs256_verifier(None, None);
        let groups = |extra: serde_json::Value| {
            verifier
                .authenticate(&hs256_with(&claims(), extra))
                .map(|p| p.groups)
        };
        assert_eq!(groups(serde_json::json!({})), Ok(vec![]));
        assert_eq!(
            groups(serde_json::json!({ "groups": ["sre", "dba", "sre"] })),
            Ok(vec!["sre".to_owned(), "dba".to_owned()])
        );
        assert_eq!(
            groups(serde_json::json!({ "groups": "sre" })),
            Ok(vec!["sre".to_owned()])
        );
        // Another claim's groups are not taken for the configured one's.
        assert_eq!(
            groups(serde_json::json!({ "roles_ext": ["sre"] })),
            Ok(vec![])
        );
        for bad in [
            serde_json::json!({ "groups": 7 }),
            serde_json::json!({ "groups": ["sre", 7] }),
            serde_json::json!({ "groups": [""] }),
            serde_json::json!({ "groups": ["a\nb"] }),
            serde_json::json!({ "groups": ["g".repeat(MAX_GROUP_BYTES + 1)] }),
            serde_json::json!({ "groups": (0..=MAX_GROUPS).map(|i| format!("g{i}")).collect::<Vec<_>>() }),
        ] {
            assert_eq!(groups(bad.clone()), Err(Failure::BadClaims), "{bad}");
        }
        let custom = verifier.with_groups_claim("cognito:groups");
        let principal = custom
            .authenticate(&hs256_with(
                &claims(),
                serde_json::json!({ "cognito:groups": ["ops"], "groups": ["sre"] }),
            ))
            .expect("a token");
        assert_eq!(principal.groups, ["ops"]);
    }

    #[test]
    fn a_minted_token_carries_its_groups() {
        let dir = dir();
        let path = dir.0.join("secret");
        std::fs::write(&path, SECRET).expect("write");
        let spec = TokenSpec {
            sub: "ana".into(),
            tenant: "acme".into(),
            roles: vec![Role::Ui],
            sessions: None,
            groups: vec!["sre".into()],
            ttl: Duration::from_secs(60),
            issuer: None,
            audience: None,
        };
        let token = mint_hs256(&path, &spec).expect("a token");
        let (_d, verifier) = hs256_verifier(None, None);
        assert_eq!(
            verifier.authenticate(&token).expect("valid").groups,
            ["sre"]
        );
        let bad = TokenSpec {
            groups: vec![String::new()],
            ..spec
        };
        assert!(mint_hs256(&path, &bad).is_err());
    }
}
