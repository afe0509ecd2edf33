//! Signing receipts (docs/approvals.md): the server's Ed25519 keys, the receipt of a
//! resolution, and the public keys as a JWK Set for `GET /.well-known/jwks.json`.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use askgate_contract::receipt::{
    AUDIT_HEAD_TYPE, Claims, HeadClaims, ISSUER, ReceiptError, verify_signed,
};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{
    Algorithm, EncodingKey, Header,
    jwk::{AlgorithmParameters, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse},
};
use sha2::{Digest as _, Sha256};

/// How long a receipt stays valid by default.
pub const DEFAULT_RECEIPT_TTL: Duration = Duration::from_secs(15 * 60);

/// The keys that sign receipts: the first signs, the others (being rotated in or
/// out) are published so that receipts they signed still verify.
pub struct Receipts {
    signing: EncodingKey,
    kid: String,
    keys: JwkSet,
    /// The JWK Set as served.
    published: String,
    ttl: Duration,
}

impl std::fmt::Debug for Receipts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receipts")
            .field("kid", &self.kid)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Receipts {
    /// Reads the PKCS#8 PEM files of `--receipt-key-file` (at least one).
    pub fn from_files(paths: &[PathBuf], ttl: Duration) -> anyhow::Result<Self> {
        let mut pems = Vec::with_capacity(paths.len());
        for path in paths {
            pems.push(read_pem(path)?);
        }
        Self::from_pems(&pems, ttl)
    }

    /// Keys from PEM texts; the first signs.
    pub fn from_pems(pems: &[Vec<u8>], ttl: Duration) -> anyhow::Result<Self> {
        anyhow::ensure!(!pems.is_empty(), "no receipt key");
        let mut keys = Vec::with_capacity(pems.len());
        let mut signing = None;
        for pem in pems {
            let key = EncodingKey::from_ed_pem(pem)
                .context("a receipt key must be an Ed25519 private key in PKCS#8 PEM")?;
            let jwk = public_jwk(&key)?;
            if signing.is_none() {
                signing = Some((key, jwk.common.key_id.clone().unwrap_or_default()));
            }
            keys.push(jwk);
        }
        let (signing, kid) = signing.context("no receipt key")?;
        let keys = JwkSet { keys };
        let published = serde_json::to_string(&keys)?;
        Ok(Self {
            signing,
            kid,
            keys,
            published,
            ttl,
        })
    }

    /// The `kid` of the key that signs.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public keys.
    pub fn keys(&self) -> &JwkSet {
        &self.keys
    }

    /// The public keys as served at `/.well-known/jwks.json`.
    pub fn published(&self) -> &str {
        &self.published
    }

    /// Signs `claims` with the current key, issued now; `iss`, `iat` and `exp` are set
    /// here.
    pub fn sign(&self, mut claims: Claims) -> anyhow::Result<String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        claims.iss = ISSUER.to_owned();
        claims.iat = now.as_secs();
        claims.exp = (now + self.ttl).as_secs();
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        header.typ = Some("JWT".into());
        Ok(jsonwebtoken::encode(&header, &claims, &self.signing)?)
    }

    /// Signs a tenant's audit head (docs/approvals.md): what proves an export's end.
    pub fn sign_head(&self, head: &HeadClaims) -> anyhow::Result<String> {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        header.typ = Some(AUDIT_HEAD_TYPE.into());
        Ok(jsonwebtoken::encode(&header, head, &self.signing)?)
    }

    /// The claims of a receipt one of these keys signed and that has not expired
    /// (no leeway: this is the clock that signed it).
    pub fn verify(&self, token: &str) -> Result<Claims, ReceiptError> {
        verify_signed(token, &self.keys, Duration::ZERO)
    }

    /// How long a receipt stays valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

fn read_pem(path: &Path) -> anyhow::Result<Vec<u8>> {
    let (pem, warning) = crate::auth::secret::read_key_file(path)
        .with_context(|| format!("failed to read the receipt key {}", path.display()))?;
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    Ok(pem)
}

/// The public half of `key` as a JWK, with its RFC 7638 thumbprint as `kid`.
fn public_jwk(key: &EncodingKey) -> anyhow::Result<Jwk> {
    let mut jwk = Jwk::from_encoding_key(key, Algorithm::EdDSA)?;
    let AlgorithmParameters::OctetKeyPair(okp) = &jwk.algorithm else {
        anyhow::bail!("not an Ed25519 key");
    };
    // RFC 7638: the required members, sorted, no spaces; for an OKP key crv, kty, x.
    let members = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#, okp.x);
    let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(members.as_bytes()));
    jwk.common.key_id = Some(kid);
    jwk.common.public_key_use = Some(PublicKeyUse::Signature);
    jwk.common.key_algorithm = Some(KeyAlgorithm::EdDSA);
    Ok(jwk)
}

#[cfg(test)]
pub(crate) mod tests {
    use askgate_contract::{
        digest::action_digest,
        receipt::{ReceiptError, verify_receipt},
    };
    use askgate_proto::v1::Action;

    use super::*;

    /// Two fixed Ed25519 keys (PKCS#8 PEM), made with `openssl genpkey -algorithm ed25519`.
    pub(crate) const KEY_A: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHGSAN8WdSYN83y/bjjMnxqhxP3l+pm2nmf61BuvPQhk\n-----END PRIVATE KEY-----\n";
    pub(crate) const KEY_B: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIIdhO40VjzlWmcocmgUDLdMQ1+wym16qgEk+uZVFtw9P\n-----END PRIVATE KEY-----\n";

    fn receipts(pems: &[&str], ttl: Duration) -> Receipts {
        let pems: Vec<Vec<u8>> = pems.iter().map(|p| p.as_bytes().to_vec()).collect();
        Receipts::from_pems(&pems, ttl).expect("in a test")
    }

    fn deploy() -> Action {
        Action {
            name: "deploy".into(),
            arguments_json: r#"{"env":"prod"}"#.into(),
            ..Default::default()
        }
    }

    fn claims(action: &Action) -> Claims {
        Claims {
            iss: String::new(),
            tenant: "acme".into(),
            session_id: "s".into(),
            rpc_id: "r1".into(),
            action_digest: action_digest(&action.name, &action.arguments_json).expect("in a test"),
            resolution: "ANSWERED".into(),
            decision: "approved".into(),
            asked_by: "bot".into(),
            answers_digest: String::new(),
            approvers: vec!["ana".into()],
            approver_rule: None,
            on_behalf_of: String::new(),
            resolved_by: "ana".into(),
            iat: 0,
            exp: 0,
            jti: "r1".into(),
        }
    }

    #[test]
    fn a_receipt_verifies_against_the_published_keys_and_binds_the_action() {
        let signer = receipts(&[KEY_A, KEY_B], DEFAULT_RECEIPT_TTL);
        let token = signer.sign(claims(&deploy())).expect("in a test");
        let keys: JwkSet = serde_json::from_str(signer.published()).expect("in a test");
        assert_eq!(keys.keys.len(), 2);
        let verified = verify_receipt(&token, &keys, "acme", &deploy()).expect("in a test");
        assert_eq!(verified.iss, "askgate");
        assert_eq!(verified.approvers, ["ana"]);
        // The same arguments, spelt otherwise, are the same action.
        let respelt = Action {
            arguments_json: "{ \"env\" : \"prod\" }".into(),
            ..deploy()
        };
        assert!(verify_receipt(&token, &keys, "acme", &respelt).is_ok());
        let other = Action {
            arguments_json: r#"{"env":"staging"}"#.into(),
            ..deploy()
        };
        assert!(matches!(
            verify_receipt(&token, &keys, "acme", &other),
            Err(ReceiptError::WrongAction { .. })
        ));
    }

    #[test]
    fn a_receipt_from_another_key_or_changed_or_expired_is_refused() {
        let signer = receipts(&[KEY_A], DEFAULT_RECEIPT_TTL);
        let stranger = receipts(&[KEY_B], DEFAULT_RECEIPT_TTL);
        let token = signer.sign(claims(&deploy())).expect("in a test");
        assert_eq!(
            verify_receipt(&token, stranger.keys(), "acme", &deploy()),
            Err(ReceiptError::UnknownKey)
        );
        // A stranger's key published under the signer's kid: the signature fails.
        let mut forged = stranger.keys().clone();
        forged.keys[0].common.key_id = Some(signer.kid().to_owned());
        assert_eq!(
            verify_receipt(&token, &forged, "acme", &deploy()),
            Err(ReceiptError::BadSignature)
        );
        // Claims changed after signing.
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut body: Claims =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).expect("in a test"))
                .expect("in a test");
        body.approvers.push("mallory".into());
        parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&body).expect("in a test"));
        assert_eq!(
            verify_receipt(&parts.join("."), signer.keys(), "acme", &deploy()),
            Err(ReceiptError::BadSignature)
        );
        // Signed long ago: expired, past the verifier's leeway.
        let mut old = claims(&deploy());
        old.iss = ISSUER.into();
        old.iat = 1_000;
        old.exp = 2_000;
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(signer.kid().to_owned());
        let expired = jsonwebtoken::encode(&header, &old, &signer.signing).expect("in a test");
        assert_eq!(
            verify_receipt(&expired, signer.keys(), "acme", &deploy()),
            Err(ReceiptError::Expired)
        );
    }

    #[test]
    fn a_receipt_of_another_tenant_or_decision_is_refused() {
        let signer = receipts(&[KEY_A], DEFAULT_RECEIPT_TTL);
        let token = signer.sign(claims(&deploy())).expect("in a test");
        assert_eq!(
            verify_receipt(&token, signer.keys(), "beta", &deploy()),
            Err(ReceiptError::WrongTenant {
                receipt: "acme".into(),
                expected: "beta".into()
            })
        );
        let rejected = signer
            .sign(Claims {
                decision: "rejected".into(),
                ..claims(&deploy())
            })
            .expect("in a test");
        assert!(matches!(
            verify_receipt(&rejected, signer.keys(), "acme", &deploy()),
            Err(ReceiptError::NotApproved(c)) if c.decision == "rejected"
        ));
        // A head is no receipt, and a receipt no head.
        let head = askgate_contract::receipt::HeadClaims {
            tenant: "acme".into(),
            seq: 3,
            hash: "ab".into(),
            at: "2026-12-03T00:00:00.000Z".into(),
        };
        let jws = signer.sign_head(&head).expect("in a test");
        assert!(matches!(
            verify_receipt(&jws, signer.keys(), "acme", &deploy()),
            Err(ReceiptError::Malformed(_))
        ));
        assert_eq!(
            askgate_contract::receipt::verify_audit_head(&jws, signer.keys(), "acme"),
            Ok(head)
        );
        assert!(
            askgate_contract::receipt::verify_audit_head(&token, signer.keys(), "acme").is_err()
        );
        assert!(matches!(
            askgate_contract::receipt::verify_audit_head(&jws, signer.keys(), "beta"),
            Err(ReceiptError::WrongTenant { .. })
        ));
    }

    #[test]
    fn a_key_that_is_not_ed25519_pkcs8_is_refused() {
        assert!(Receipts::from_pems(&[b"not a key".to_vec()], DEFAULT_RECEIPT_TTL).is_err());
        assert!(Receipts::from_pems(&[], DEFAULT_RECEIPT_TTL).is_err());
    }
}
