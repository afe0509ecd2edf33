//! `--jwt-jwks-url`: tokens verified against an identity provider's key set, fetched
//! over HTTP and followed through a key rotation without a restart. The provider's
//! side is a small HTTP server serving a JWKS whose keys (ES256, generated here, with
//! no `alg`, as providers often publish them) the test replaces.

use std::{
    convert::Infallible,
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_client::Reason;
use askgate_server::{
    ServerConfig,
    auth::{
        jwks::REFETCH_AFTER,
        jwt::{Audience, Claims, DEFAULT_GROUPS_CLAIM, KeySource},
    },
    server::AuthConfig,
};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use rcgen::KeyPair;
use tokio::{net::TcpListener, task::JoinHandle};
use tonic::Code;

use crate::support::{TestServer, eventually, test_config};

/// One signing key of the provider: its `kid`, its private key, its public JWK.
struct SigningKey {
    kid: String,
    pair: KeyPair,
}

impl SigningKey {
    fn generate(kid: &str) -> Self {
        Self {
            kid: kid.to_owned(),
            pair: KeyPair::generate().expect("a P-256 key"),
        }
    }

    /// The public key as a JWK, without `alg`.
    fn jwk(&self) -> serde_json::Value {
        let raw = self.pair.public_key_raw();
        assert_eq!((raw.len(), raw[0]), (65, 4), "an uncompressed P-256 point");
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        serde_json::json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "kid": self.kid,
            "x": b64(&raw[1..33]), "y": b64(&raw[33..]),
        })
    }

    /// A token for `sub` in tenant `acme` with the `ui` role, signed with this key.
    fn token(&self, sub: &str) -> String {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let claims = Claims {
            sub: sub.into(),
            tenant: "acme".into(),
            roles: vec!["ui".into()],
            sessions: None,
            exp: now + 600,
            nbf: None,
            iss: None,
            aud: None::<Audience>,
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let key = jsonwebtoken::EncodingKey::from_ec_pem(self.pair.serialize_pem().as_bytes())
            .expect("an EC key");
        jsonwebtoken::encode(&header, &claims, &key).expect("sign")
    }
}

/// The provider's key set endpoint: serves `GET /jwks` with the keys it holds now.
struct Provider {
    url: String,
    jwks: Arc<Mutex<String>>,
    fetches: Arc<Mutex<usize>>,
    task: JoinHandle<()>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Provider {
    async fn start(keys: &[&SigningKey]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (jwks, fetches) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(0)));
        let (j, f) = (jwks.clone(), fetches.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (j, f) = (j.clone(), f.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (j, f) = (j.clone(), f.clone());
                        async move {
                            let mut response = Response::new(Full::new(Bytes::new()));
                            if request.uri().path() == "/jwks" {
                                *f.lock() += 1;
                                *response.body_mut() = Full::new(Bytes::from(j.lock().clone()));
                            } else {
                                *response.status_mut() = hyper::StatusCode::NOT_FOUND;
                            }
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        let provider = Self {
            url: format!("http://{addr}/jwks"),
            jwks,
            fetches,
            task,
        };
        provider.publish(keys);
        provider
    }

    /// Publishes `keys` in place of the ones before (a rotation).
    fn publish(&self, keys: &[&SigningKey]) {
        let set = serde_json::json!({ "keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>() });
        *self.jwks.lock() = set.to_string();
    }
}

fn config(url: &str) -> ServerConfig {
    ServerConfig {
        auth: AuthConfig::Jwt {
            key: KeySource::JwksUrl(url.to_owned()),
            issuer: None,
            audience: None,
            groups_claim: DEFAULT_GROUPS_CLAIM.into(),
        },
        ..test_config()
    }
}

/// Who a token is, as the server says; or the refusal's code and reason.
async fn who(server: &TestServer, token: &str) -> Result<String, (Code, Reason)> {
    let mut client = server.client().await.with_token(token).expect("token");
    client
        .who_am_i()
        .await
        .map(|me| me.subject)
        .map_err(|e| (e.code(), e.reason()))
}

/// A token signed with a key of the fetched set is taken; after the provider rotates
/// to a new key, a token signed with it is taken once the set is fetched again (the
/// token's unknown `kid` starts that fetch), and the retired key's tokens are refused.
#[tokio::test]
async fn tokens_are_verified_against_the_fetched_key_set_through_a_rotation() {
    let (old, new) = (
        SigningKey::generate("k-2026-1"),
        SigningKey::generate("k-2026-2"),
    );
    let provider = Provider::start(&[&old]).await;
    let server = TestServer::start_with(config(&provider.url)).await;
    assert_eq!(who(&server, &old.token("ana")).await, Ok("ana".into()));
    assert_eq!(*provider.fetches.lock(), 1, "fetched once, at start");

    // A key the provider never published: refused, as a token of no key.
    let stranger = SigningKey::generate("k-other");
    let refused = who(&server, &stranger.token("eve")).await;
    assert_eq!(
        refused,
        Err((Code::Unauthenticated, Reason::Unauthenticated))
    );

    provider.publish(&[&new]);
    let token = new.token("bo");
    let accepted = eventually("the new key, once the set is fetched again", || async {
        who(&server, &token).await.ok()
    })
    .await;
    assert_eq!(accepted, "bo");
    assert_eq!(
        who(&server, &old.token("ana")).await,
        Err((Code::Unauthenticated, Reason::Unauthenticated)),
        "the retired key's tokens are refused"
    );
    // Unknown keys start at most one fetch per interval, not one per token.
    let (fetches, started) = (*provider.fetches.lock(), std::time::Instant::now());
    for _ in 0..20 {
        let _ = who(&server, &stranger.token("eve")).await;
    }
    let intervals = started.elapsed().as_secs_f64() / REFETCH_AFTER.as_secs_f64();
    let allowed = fetches + 1 + intervals as usize;
    assert!(
        *provider.fetches.lock() <= allowed,
        "{} fetches for 20 tokens of an unknown key in {:?}",
        *provider.fetches.lock() - fetches,
        started.elapsed()
    );
}

/// A node whose key set cannot be fetched does not start, and says why.
#[tokio::test]
async fn a_node_whose_key_set_cannot_be_fetched_does_not_start() {
    let provider = Provider::start(&[]).await;
    *provider.jwks.lock() = "not a key set".into();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let served = tokio::time::timeout(
        Duration::from_secs(20),
        askgate_server::server::run(listener, config(&provider.url), std::future::pending()),
    )
    .await
    .expect("start fails at once");
    let error = format!("{:#}", served.expect_err("no key set"));
    assert!(
        error.contains("--jwt-jwks-url") && error.contains("not a JWKS"),
        "{error}"
    );
}
