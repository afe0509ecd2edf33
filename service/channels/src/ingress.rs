//! What an inbound endpoint is (a channel's entry on askgate's HTTP port: Slack's
//! interactivity, Telegram's updates, the pages of mailed links) and what it answers.
//! The server serves every [`Ingress`] behind a layer that bounds what an
//! unauthenticated caller can make the node hold.

use bytes::Bytes;
use http::{Response, StatusCode, header, request::Parts};
use serde_json::{Value, json};

/// What an ingress answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
    /// Headers besides the content type and the HTML pages' own (`Location`,
    /// `Set-Cookie`).
    pub headers: Vec<(header::HeaderName, http::HeaderValue)>,
}

impl Reply {
    /// A JSON reply (an empty body without `body`).
    pub fn json(status: StatusCode, body: Option<Value>) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())),
            headers: Vec::new(),
        }
    }

    /// An HTML page, kept out of caches, frames and referrers (its URL may be a
    /// secret link), running no script.
    pub fn html(status: StatusCode, page: String) -> Self {
        Self {
            status,
            content_type: "text/html; charset=utf-8",
            body: Bytes::from(page),
            headers: Vec::new(),
        }
    }

    /// A `303 See Other` to `location` (kept out of caches).
    pub fn see_other(location: http::HeaderValue) -> Self {
        Self {
            status: StatusCode::SEE_OTHER,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::new(),
            headers: vec![
                (header::LOCATION, location),
                (
                    header::CACHE_CONTROL,
                    http::HeaderValue::from_static("no-store"),
                ),
            ],
        }
    }

    /// This reply with one more header (`Set-Cookie` may be given more than once).
    pub fn with_header(mut self, name: header::HeaderName, value: http::HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// `{"error": text}` with `status`.
    pub fn error(status: StatusCode, text: &str) -> Self {
        Self::json(status, Some(json!({ "error": text })))
    }

    /// The HTTP response: HTML pages kept out of caches, frames and referrers.
    pub fn into_response(self) -> Response<tonic::body::Body> {
        let mut response =
            Response::new(tonic::body::Body::new(http_body_util::Full::new(self.body)));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static(self.content_type),
        );
        for (name, value) in self.headers {
            headers.append(name, value);
        }
        if self.content_type.starts_with("text/html") {
            for (name, value) in [
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                ),
                (header::X_FRAME_OPTIONS, "DENY"),
                // Not no-referrer: Chromium then sends `Origin: null` with the page's own
                // form, which the origin policy refuses; same-origin keeps the URL (a
                // secret link) from every other site all the same.
                (header::REFERRER_POLICY, "same-origin"),
                (header::CACHE_CONTROL, "no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ] {
                headers.insert(name, http::HeaderValue::from_static(value));
            }
        }
        response
    }
}

impl From<(StatusCode, Option<Value>)> for Reply {
    fn from((status, body): (StatusCode, Option<Value>)) -> Self {
        Self::json(status, body)
    }
}

/// An HTTP entry of askgate's port that outside services call.
#[async_trait::async_trait]
pub trait Ingress: Send + Sync + 'static {
    /// Whether a request to `path` is this ingress's.
    fn claims(&self, path: &str) -> bool;

    /// Bytes of a body read at most.
    fn max_body(&self) -> usize;

    /// Checks a request before its body is read (its method, its headers): a refusal
    /// is answered at once.
    fn precheck(&self, parts: &Parts) -> Result<(), Reply>;

    /// Answers a request whose body was read.
    async fn handle(&self, parts: Parts, body: Bytes) -> Reply;
}
