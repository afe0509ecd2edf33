//! A JSON Web Key Set the server fetches from its identity provider
//! (`--jwt-jwks-url`): fetched before the node serves, kept, and fetched again when a
//! token names a key it does not hold (at most once per [`REFETCH_AFTER`]) and every
//! [`REFRESH_EVERY`], so that the provider's key rotation is followed without a
//! restart. A token naming an unknown key is refused while the set is fetched again;
//! the caller's retry finds the new key. A fetch that fails keeps the keys held.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet},
};
use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use crate::channels::egress::send::{Sender, Target};

/// The least time between two fetches a token's unknown key starts.
pub const REFETCH_AFTER: Duration = Duration::from_secs(2);
/// How often the set is fetched again regardless.
pub const REFRESH_EVERY: Duration = Duration::from_secs(300);
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a key set read at most.
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// Keys by `kid`, each with the one algorithm a token may use with it.
pub type KeysByKid = HashMap<String, (Algorithm, DecodingKey)>;

/// Whether a key set may hold shared secrets (HS256): a file the operator keeps may; a
/// set fetched from a URL is public by nature, and a secret in it would let anyone
/// who reads it sign tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    Allowed,
    Refused,
}

/// The keys of a JWKS document; `from` names it in errors. A key without `alg` takes
/// its type's (RSA: RS256, EC P-256: ES256), as identity providers often leave it out.
pub fn parse(text: &str, from: &str, secrets: Secrets) -> anyhow::Result<KeysByKid> {
    let set: JwkSet =
        serde_json::from_str(text).with_context(|| format!("{from} is not a JWKS"))?;
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = &jwk.common.key_id else {
            bail!("every key in {from} needs a kid");
        };
        let alg = algorithm(jwk).with_context(|| format!("{from}: key {kid}"))?;
        if alg == Algorithm::HS256 && secrets == Secrets::Refused {
            bail!(
                "{from}: key {kid} is a shared secret (HS256), which a published key set must not hold"
            );
        }
        keys.insert(kid.clone(), (alg, DecodingKey::from_jwk(jwk)?));
    }
    Ok(keys)
}

fn algorithm(jwk: &Jwk) -> anyhow::Result<Algorithm> {
    let alg = match (jwk.common.key_algorithm, &jwk.algorithm) {
        (Some(alg), _) => Algorithm::try_from(alg).context("unsupported alg")?,
        (None, AlgorithmParameters::RSA(_)) => Algorithm::RS256,
        (None, AlgorithmParameters::EllipticCurve(ec)) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        (None, _) => bail!("no alg, and no default for its key type"),
    };
    match alg {
        Algorithm::HS256 | Algorithm::RS256 | Algorithm::ES256 => Ok(alg),
        other => bail!("{other:?}: only HS256, RS256 and ES256 are accepted"),
    }
}

/// The key set at a URL, and when it was last fetched.
pub struct RemoteJwks {
    url: String,
    target: Target,
    sender: Sender,
    keys: RwLock<Arc<KeysByKid>>,
    fetched: Mutex<Instant>,
    fetching: AtomicBool,
}

impl RemoteJwks {
    /// Fetches the set at `url` (the operator's: internal addresses are allowed) and
    /// keeps it fresh in the background for as long as it is held; `named` is where
    /// the URL came from, for errors (`--jwt-jwks-url`, the issuer's discovery).
    pub async fn start(url: &str, named: &str) -> anyhow::Result<Arc<Self>> {
        let target = Target::parse(url).map_err(|e| anyhow::anyhow!("{named}: {e}"))?;
        let sender = Sender::new(true, FETCH_TIMEOUT).with_max_response(MAX_JWKS_BYTES);
        let keys = fetch(&sender, &target, url)
            .await
            .with_context(|| format!("{named} {url}"))?;
        info!(url, keys = keys.len(), "fetched the JWT key set");
        let jwks = Arc::new(Self {
            url: url.to_owned(),
            target,
            sender,
            keys: RwLock::new(Arc::new(keys)),
            fetched: Mutex::new(Instant::now()),
            fetching: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&jwks);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH_EVERY).await;
                let Some(jwks) = weak.upgrade() else { return };
                jwks.refetch().await;
            }
        });
        Ok(jwks)
    }

    /// The key `kid` names, if the set holds it; else the set is fetched again soon.
    pub fn key(self: &Arc<Self>, kid: &str) -> Option<(Algorithm, DecodingKey)> {
        if let Some(key) = self.keys.read().get(kid) {
            return Some(key.clone());
        }
        let due = self.fetched.lock().elapsed() >= REFETCH_AFTER;
        if due && !self.fetching.swap(true, Ordering::AcqRel) {
            let jwks = self.clone();
            tokio::spawn(async move {
                jwks.refetch().await;
                jwks.fetching.store(false, Ordering::Release);
            });
        }
        None
    }

    /// The key `kid` names, fetching the set again first when it does not hold it (at
    /// most once per [`REFETCH_AFTER`], waiting out the rest of that time): for a
    /// caller that can wait, such as a sign-in just after the provider rotated its key.
    pub async fn key_fetched(self: &Arc<Self>, kid: &str) -> Option<(Algorithm, DecodingKey)> {
        if let Some(key) = self.keys.read().get(kid) {
            return Some(key.clone());
        }
        let since = self.fetched.lock().elapsed();
        tokio::time::sleep(REFETCH_AFTER.saturating_sub(since)).await;
        if let Some(key) = self.keys.read().get(kid) {
            return Some(key.clone());
        }
        if self.fetched.lock().elapsed() >= REFETCH_AFTER {
            self.refetch().await;
        }
        self.keys.read().get(kid).cloned()
    }

    async fn refetch(&self) {
        *self.fetched.lock() = Instant::now();
        match fetch(&self.sender, &self.target, &self.url).await {
            Ok(keys) => *self.keys.write() = Arc::new(keys),
            Err(e) => {
                warn!(url = %self.url, "fetching the JWT key set failed, keeping the keys held: {e:#}")
            }
        }
    }
}

async fn fetch(sender: &Sender, target: &Target, url: &str) -> anyhow::Result<KeysByKid> {
    let (status, body) = sender.get(target).await.map_err(|e| anyhow::anyhow!(e))?;
    if !status.is_success() {
        bail!("answered {status}");
    }
    let text = std::str::from_utf8(&body).context("not UTF-8")?;
    parse(text, url, Secrets::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA_N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";

    fn set(keys: serde_json::Value) -> String {
        serde_json::json!({ "keys": keys }).to_string()
    }

    #[test]
    fn a_key_without_alg_takes_its_types() {
        let keys = parse(
            &set(serde_json::json!([
                { "kty": "RSA", "kid": "r", "n": RSA_N, "e": "AQAB" },
                { "kty": "RSA", "kid": "r-alg", "alg": "RS256", "n": RSA_N, "e": "AQAB" },
            ])),
            "test",
            Secrets::Refused,
        )
        .expect("a key set");
        assert_eq!(keys["r"].0, Algorithm::RS256);
        assert_eq!(keys["r-alg"].0, Algorithm::RS256);
    }

    #[test]
    fn keys_without_kid_or_of_other_algorithms_are_refused() {
        let no_kid = parse(
            &set(serde_json::json!([{ "kty": "RSA", "n": RSA_N, "e": "AQAB" }])),
            "test",
            Secrets::Allowed,
        );
        assert!(format!("{:#}", no_kid.expect_err("no kid")).contains("needs a kid"));
        let other = parse(
            &set(serde_json::json!([
                { "kty": "RSA", "kid": "r", "alg": "RS512", "n": RSA_N, "e": "AQAB" },
            ])),
            "test",
            Secrets::Allowed,
        );
        assert!(format!("{:#}", other.expect_err("RS512")).contains("only HS256, RS256 and ES256"));
        let not_a_set = parse("[]", "the file", Secrets::Allowed);
        assert!(
            format!("{:#}", not_a_set.expect_err("not a set")).contains("the file is not a JWKS")
        );
    }

    #[test]
    fn a_fetched_set_holds_no_shared_secret() {
        let secret = set(serde_json::json!([
            { "kty": "oct", "kid": "h", "alg": "HS256", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA" },
        ]));
        assert!(parse(&secret, "a file", Secrets::Allowed).is_ok());
        let fetched = parse(&secret, "https://idp.example/jwks", Secrets::Refused);
        assert!(format!("{:#}", fetched.expect_err("a secret")).contains("shared secret"));
    }
}
