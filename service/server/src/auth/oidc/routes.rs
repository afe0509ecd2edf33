//! The sign-in's HTTP routes on askgate's port:
//!
//! - `GET /console/login`: to the provider's authorization endpoint (code flow, PKCE
//!   S256, state and nonce), with what the callback must check sealed into a
//!   short-lived cookie of its own path (SameSite=Lax: the provider's redirect back is
//!   a cross-site navigation, which a Strict cookie would not go with).
//! - `GET /console/callback`: checks the state, exchanges the code (with the PKCE
//!   verifier, and the client secret if there is one), verifies the ID token, and
//!   sets the console session cookie (HttpOnly, SameSite=Strict, Secure), then on to
//!   `/console/`.
//! - `GET /console/session`: who is signed in and the CSRF token, for the page.
//! - `POST /console/logout`: ends the session in this browser.

use std::sync::Arc;

use askgate_channels::ingress::{Ingress, Reply};
use base64::{
    Engine as _,
    engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD as B64URL},
};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header, request::Parts};
use ring::rand::SystemRandom;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use tracing::{info, warn};

use super::{
    SignIn,
    id_token::{self, Refused},
    session::{CSRF_HEADER, SESSION_COOKIE, cookie, random_token},
};
use crate::domain::shown::escape_html;
use askgate_channels::secret::Secret;

pub const LOGIN_PATH: &str = "/console/login";
pub const CALLBACK_PATH: &str = "/console/callback";
pub const SESSION_PATH: &str = "/console/session";
pub const LOGOUT_PATH: &str = "/console/logout";

/// The cookie that carries a sign-in from the login route to the callback.
const LOGIN_COOKIE: &str = "askgate_login";
/// What the sign-in's cookie is sealed for.
const LOGIN_CONTEXT: &str = "askgate console login v1";
/// How long a person has at the provider before the sign-in must start again.
const LOGIN_TTL_SECS: u64 = 600;
/// Bytes of a code or state taken from the callback's query.
const MAX_QUERY_BYTES: usize = 8 * 1024;

/// What the callback must check, sealed into the login cookie.
#[derive(Serialize, Deserialize)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    redirect_uri: String,
    exp: u64,
}

/// The routes, as an ingress of the node's port.
pub struct SignInRoutes(pub Arc<SignIn>);

#[async_trait::async_trait]
impl Ingress for SignInRoutes {
    fn claims(&self, path: &str) -> bool {
        matches!(
            path,
            LOGIN_PATH | CALLBACK_PATH | SESSION_PATH | LOGOUT_PATH
        )
    }

    fn max_body(&self) -> usize {
        1024
    }

    fn precheck(&self, parts: &Parts) -> Result<(), Reply> {
        let method = match parts.uri.path() {
            LOGOUT_PATH => Method::POST,
            _ => Method::GET,
        };
        match parts.method == method {
            true => Ok(()),
            false => Err(Reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("{} takes {method}", parts.uri.path()),
            )),
        }
    }

    async fn handle(&self, parts: Parts, _body: Bytes) -> Reply {
        let sign_in = &*self.0;
        match parts.uri.path() {
            LOGIN_PATH => sign_in.login(&parts),
            CALLBACK_PATH => sign_in.callback(&parts).await,
            SESSION_PATH => sign_in.session(&parts),
            _ => sign_in.logout(&parts),
        }
    }
}

impl SignIn {
    /// Where the provider sends the browser back to ([`callback_origin`]).
    fn origin(&self, parts: &Parts) -> Result<String, Reply> {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| parts.uri.authority().map(|a| a.as_str()));
        callback_origin(self.public_origin.as_deref(), self.tls, host)
            .map_err(|why| page(StatusCode::BAD_REQUEST, why))
    }

    fn login(&self, parts: &Parts) -> Reply {
        match self.start_login(parts) {
            Ok(reply) | Err(reply) => reply,
        }
    }

    fn start_login(&self, parts: &Parts) -> Result<Reply, Reply> {
        let origin = self.origin(parts)?;
        let random = SystemRandom::new();
        let token =
            || random_token(&random).map_err(|e| page(StatusCode::INTERNAL_SERVER_ERROR, &e));
        let pending = Pending {
            state: token()?,
            nonce: token()?,
            verifier: token()?,
            redirect_uri: format!("{origin}{CALLBACK_PATH}"),
            exp: now() + LOGIN_TTL_SECS,
        };
        let challenge = B64URL.encode(Sha256::digest(pending.verifier.as_bytes()));
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &pending.redirect_uri)
            .append_pair("scope", &self.provider.scope)
            .append_pair("state", &pending.state)
            .append_pair("nonce", &pending.nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .finish();
        let endpoint = &self.provider.authorization_endpoint;
        let joiner = if endpoint.contains('?') { '&' } else { '?' };
        let location = HeaderValue::try_from(format!("{endpoint}{joiner}{query}"))
            .map_err(|_| page(StatusCode::INTERNAL_SERVER_ERROR, "bad authorization URL"))?;
        let json = serde_json::to_string(&pending).unwrap_or_default();
        let sealed = self
            .sessions
            .key()
            .seal(LOGIN_CONTEXT, &Secret::new(json))
            .map_err(|e| page(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))?;
        Ok(Reply::see_other(location).with_header(
            header::SET_COOKIE,
            set_cookie(LOGIN_COOKIE, &sealed, CALLBACK_PATH, "Lax", LOGIN_TTL_SECS),
        ))
    }

    async fn callback(&self, parts: &Parts) -> Reply {
        let ended = set_cookie(LOGIN_COOKIE, "", CALLBACK_PATH, "Lax", 0);
        let reply = match self.complete(parts).await {
            Ok(reply) => reply,
            Err(refused) => refused,
        };
        reply.with_header(header::SET_COOKIE, ended)
    }

    async fn complete(&self, parts: &Parts) -> Result<Reply, Reply> {
        let query = parts.uri.query().unwrap_or_default();
        if query.len() > MAX_QUERY_BYTES {
            return Err(page(
                StatusCode::BAD_REQUEST,
                "The callback's query is too long.",
            ));
        }
        let param = |name: &str| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.into_owned())
        };
        let pending = cookie(&parts.headers, LOGIN_COOKIE)
            .and_then(|sealed| self.sessions.key().open(LOGIN_CONTEXT, sealed).ok())
            .and_then(|json| serde_json::from_str::<Pending>(json.expose()).ok())
            .filter(|pending| pending.exp > now())
            .ok_or_else(|| {
                again("This sign-in took longer than ten minutes, or began in another browser.")
            })?;
        let state = param("state").unwrap_or_default();
        if !bool::from(state.as_bytes().ct_eq(pending.state.as_bytes())) {
            return Err(again(
                "This answer from the identity provider is not for this sign-in.",
            ));
        }
        if let Some(error) = param("error") {
            let description = param("error_description").unwrap_or_default();
            let said: String = format!("{error}: {description}")
                .chars()
                .take(300)
                .collect();
            return Err(page(
                StatusCode::FORBIDDEN,
                &format!("The identity provider did not sign you in ({said})."),
            ));
        }
        let code = param("code").ok_or_else(|| again("The identity provider sent no code."))?;
        let id_token = self.exchange(&code, &pending).await?;
        let who = id_token::verify(&id_token, &self.provider.jwks, &self.config, &pending.nonce)
            .await
            .map_err(|refused| {
                let status = match refused {
                    Refused::Token(_) => StatusCode::BAD_GATEWAY,
                    Refused::NotAdmitted(_) => StatusCode::FORBIDDEN,
                };
                info!(issuer = %self.config.issuer, "console sign-in refused: {refused}");
                page(status, &refused.to_string())
            })?;
        let (session, value) = self
            .sessions
            .issue(who)
            .map_err(|why| page(StatusCode::FORBIDDEN, &why))?;
        info!(tenant = %session.tenant, sub = %session.sub, "signed in to the console");
        let ttl = self.sessions.ttl().as_secs();
        Ok(
            Reply::see_other(HeaderValue::from_static("/console/#/inbox")).with_header(
                header::SET_COOKIE,
                set_cookie(SESSION_COOKIE, &value, "/", "Strict", ttl),
            ),
        )
    }

    /// The ID token the token endpoint gives for `code`.
    async fn exchange(&self, code: &str, pending: &Pending) -> Result<String, Reply> {
        let mut headers = vec![
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("accept", "application/json".to_owned()),
        ];
        let body = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", &pending.redirect_uri)
                .append_pair("code_verifier", &pending.verifier);
            match &self.client_secret {
                // client_secret_basic (RFC 6749 §2.3.1): both parts form-encoded first.
                Some(secret) => {
                    let encode =
                        |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                    let pair = format!(
                        "{}:{}",
                        encode(&self.config.client_id),
                        encode(secret.expose())
                    );
                    headers.push(("authorization", format!("Basic {}", BASE64.encode(pair))));
                }
                None => {
                    form.append_pair("client_id", &self.config.client_id);
                }
            }
            form.finish()
        };
        let unreachable = |why: String| {
            warn!(issuer = %self.config.issuer, "the token endpoint failed: {why}");
            page(
                StatusCode::BAD_GATEWAY,
                "The identity provider could not complete the sign-in. Try again in a moment.",
            )
        };
        let (status, body) = self
            .sender
            .post(&self.provider.token_endpoint, &headers, Bytes::from(body))
            .await
            .map_err(unreachable)?;
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if !status.is_success() {
            let error = answer["error"].as_str().unwrap_or("no error given");
            return Err(unreachable(format!("{status}: {error}")));
        }
        answer["id_token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| unreachable("its answer holds no id_token".into()))
    }

    fn session(&self, parts: &Parts) -> Reply {
        match cookie(&parts.headers, SESSION_COOKIE).and_then(|v| self.sessions.open(v)) {
            Some(session) => Reply::json(StatusCode::OK, Some(session.shown())),
            None => Reply::json(
                StatusCode::UNAUTHORIZED,
                Some(json!({ "error": "not signed in", "login": LOGIN_PATH })),
            ),
        }
        .with_header(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
    }

    fn logout(&self, parts: &Parts) -> Reply {
        let session = cookie(&parts.headers, SESSION_COOKIE).and_then(|v| self.sessions.open(v));
        if let Some(session) = &session {
            let sent = parts.headers.get(CSRF_HEADER).map(HeaderValue::as_bytes);
            if !sent.is_some_and(|sent| bool::from(sent.ct_eq(session.csrf.as_bytes()))) {
                return Reply::error(
                    StatusCode::FORBIDDEN,
                    "logging out needs the session's x-askgate-csrf header",
                );
            }
            info!(tenant = %session.tenant, sub = %session.sub, "signed out of the console");
        }
        Reply::json(StatusCode::OK, Some(json!({ "login": LOGIN_PATH }))).with_header(
            header::SET_COOKIE,
            set_cookie(SESSION_COOKIE, "", "/", "Strict", 0),
        )
    }
}

/// The origin the provider sends the browser back to: the `--public-url`'s, else the
/// request's own host's. Only https, or plain HTTP to a loopback name (where browsers
/// keep Secure cookies too): plain HTTP to another host would show the session to the
/// network.
fn callback_origin(
    public: Option<&str>,
    tls: bool,
    host: Option<&str>,
) -> Result<String, &'static str> {
    let origin = match (public, host) {
        (Some(origin), _) => origin.to_owned(),
        (None, Some(host)) => format!("{}://{host}", if tls { "https" } else { "http" }),
        (None, None) => return Err("The request names no host."),
    };
    let Some(host) = origin.strip_prefix("http://") else {
        return Ok(origin);
    };
    let name = host
        .parse::<http::uri::Authority>()
        .map(|a| a.host().trim_matches(['[', ']']).to_ascii_lowercase())
        .unwrap_or_default();
    let loopback = name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match loopback {
        true => Ok(origin),
        false => Err(
            "Signing in over plain HTTP would show the session to the network: serve askgate \
             with TLS, or behind an https proxy named by --public-url.",
        ),
    }
}

/// A `Set-Cookie` value: HttpOnly and Secure always (the sign-in runs only on TLS
/// or on a loopback name, which browsers count as secure).
fn set_cookie(name: &str, value: &str, path: &str, same_site: &str, max_age: u64) -> HeaderValue {
    HeaderValue::try_from(format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; Secure; SameSite={same_site}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("askgate_invalid=; Max-Age=0"))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// A page that says why, with a way back to the console.
fn page(status: StatusCode, text: &str) -> Reply {
    Reply::html(
        status,
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>askgate \
             sign-in</title></head><body><h1>askgate sign-in</h1><p data-testid=\"sign-in-refused\">{}</p>\
             <p><a href=\"{LOGIN_PATH}\">Sign in again</a> · <a href=\"/console/\">The console</a></p>\
             </body></html>",
            escape_html(text)
        ),
    )
}

/// A sign-in that must start again.
fn again(why: &str) -> Reply {
    page(StatusCode::BAD_REQUEST, &format!("{why} Sign in again."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_in_runs_over_https_or_on_a_loopback_name_only() {
        for (public, tls, host, expected) in [
            (
                None,
                false,
                Some("127.0.0.1:50051"),
                Ok("http://127.0.0.1:50051"),
            ),
            (
                None,
                false,
                Some("localhost:8080"),
                Ok("http://localhost:8080"),
            ),
            (None, false, Some("[::1]:8080"), Ok("http://[::1]:8080")),
            (
                None,
                true,
                Some("askgate.example.com"),
                Ok("https://askgate.example.com"),
            ),
            (
                Some("https://askgate.example.com"),
                false,
                Some("10.0.0.5:50051"),
                Ok("https://askgate.example.com"),
            ),
            (None, false, Some("askgate.example.com"), Err(())),
            (None, false, Some("10.0.0.5:50051"), Err(())),
            (
                Some("http://askgate.example.com"),
                false,
                Some("127.0.0.1:1"),
                Err(()),
            ),
            (None, false, None, Err(())),
        ] {
            let got = callback_origin(public, tls, host);
            assert_eq!(
                got.as_deref().map_err(|_| ()),
                expected,
                "{public:?} {tls} {host:?}"
            );
        }
    }
}
