//! What browsers need besides gRPC-Web itself (which tonic-web translates): CORS for
//! web apps on other origins (`--cors-origin`), and the console's static files at
//! `/console/` (`--console`), embedded in the binary.

use std::{
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures_util::future::Either;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use tower::{Layer, Service};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// `--cors-origin`: which other origins' pages may call the API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// Same origin only (no CORS headers: browsers refuse cross-origin calls).
    #[default]
    SameOrigin,
    /// Pages of any origin (`*`); callers still need their credentials.
    Any,
    /// Pages of exactly these origins (`https://app.example.com`).
    List(Vec<HeaderValue>),
}

impl CorsOrigins {
    /// Parses the flag's values: `*`, or origins as browsers send them
    /// (`scheme://host[:port]`, no path).
    pub fn parse(values: &[String]) -> Result<Self, String> {
        if values.is_empty() {
            return Ok(Self::SameOrigin);
        }
        if values.iter().any(|v| v == "*") {
            return match values.len() {
                1 => Ok(Self::Any),
                _ => Err("--cors-origin '*' allows every origin: give it alone".into()),
            };
        }
        values
            .iter()
            .map(|value| parse_origin(value))
            .collect::<Result<_, _>>()
            .map(Self::List)
    }

    /// The CORS layer for gRPC-Web callers, or `None` for same origin only.
    pub fn layer(&self) -> Option<CorsLayer> {
        let origins = match self {
            Self::SameOrigin => return None,
            Self::Any => AllowOrigin::any(),
            Self::List(origins) => AllowOrigin::list(origins.iter().cloned()),
        };
        Some(
            CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([Method::POST])
                .allow_headers(GRPC_WEB_REQUEST_HEADERS.map(HeaderName::from_static))
                .expose_headers(GRPC_WEB_RESPONSE_HEADERS.map(HeaderName::from_static))
                .max_age(CORS_MAX_AGE),
        )
    }
}

/// Headers a gRPC-Web client sends: its framing, its deadline, the credential, and
/// the W3C trace context of the page's span (docs/operations.md, "Traces").
const GRPC_WEB_REQUEST_HEADERS: [&str; 7] = [
    "authorization",
    "content-type",
    "grpc-timeout",
    "x-grpc-web",
    "x-user-agent",
    "traceparent",
    "tracestate",
];

/// Headers a gRPC-Web client must read: a call that fails at once carries its status
/// (and askgate's error reason, in the details) in the headers, not in the body.
const GRPC_WEB_RESPONSE_HEADERS: [&str; 3] =
    ["grpc-status", "grpc-message", "grpc-status-details-bin"];

/// How long a browser may reuse a preflight's answer.
const CORS_MAX_AGE: Duration = Duration::from_secs(600);

fn parse_origin(value: &str) -> Result<HeaderValue, String> {
    let invalid = || {
        format!(
            "--cors-origin {value:?} is not an origin: give scheme://host[:port] with no \
             path, as in https://app.example.com, or '*'"
        )
    };
    let uri: http::Uri = value.parse().map_err(|_| invalid())?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let bare = !value.ends_with('/') && uri.path() == "/" && uri.query().is_none();
    if !scheme_ok || uri.authority().is_none() || !bare {
        return Err(invalid());
    }
    // Browsers send scheme and host in lower case.
    HeaderValue::from_str(&value.to_ascii_lowercase()).map_err(|_| invalid())
}

/// The console's files, built from client/web by `npm run build` and committed, so
/// that a plain `cargo build` needs no npm.
const ASSETS: [Asset; 3] = [
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../../client/web/dist/index.html"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../client/web/dist/console.js"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../../client/web/dist/console.css"),
    },
];

/// Where the console is served.
pub const CONSOLE_PATH: &str = "/console/";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

impl Asset {
    /// The asset at `path` and its ETag.
    fn find(path: &str) -> Option<(&'static Asset, HeaderValue)> {
        let name = match path.strip_prefix(CONSOLE_PATH)? {
            "" => "index.html",
            name => name,
        };
        let at = ASSETS.iter().position(|asset| asset.name == name)?;
        Some((&ASSETS[at], ETAGS[at].clone()))
    }
}

/// Each asset's strong validator, its content's hash (computed once): a browser
/// revalidates cheaply and never keeps an old build.
static ETAGS: std::sync::LazyLock<Vec<HeaderValue>> = std::sync::LazyLock::new(|| {
    use sha2::Digest as _;
    ASSETS
        .iter()
        .map(|asset| {
            let digest = sha2::Sha256::digest(asset.body);
            HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..12])))
                .expect("a hex ETag is a valid header value")
        })
        .collect()
});

/// An HTTP entry in front of the services that answers some requests itself and
/// passes every other one on: the console's files, the receipts' keys, a refusal of
/// the Host/Origin policy.
pub trait Answers: Clone {
    /// The response to `request`, or `None` to pass it on.
    fn answer<B>(&self, request: &Request<B>) -> Option<Response<tonic::body::Body>>;
}

/// The layer of an [`Answers`].
#[derive(Debug, Clone)]
pub struct AnswersLayer<A>(pub A);

impl<S, A: Answers> Layer<S> for AnswersLayer<A> {
    type Service = Answering<S, A>;

    fn layer(&self, inner: S) -> Answering<S, A> {
        Answering {
            inner,
            answers: Arc::new(self.0.clone()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Answering<S, A> {
    inner: S,
    /// Shared: the service stack is cloned for every request.
    answers: Arc<A>,
}

impl<S, A, B> Service<Request<B>> for Answering<S, A>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    A: Answers,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Either<std::future::Ready<Result<Self::Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match self.answers.answer(&request) {
            Some(response) => Either::Left(std::future::ready(Ok(response))),
            None => Either::Right(self.inner.call(request)),
        }
    }
}

/// Serves the console's files on `GET /console/...` (and redirects `/` and `/console`
/// there); every other request, gRPC and gRPC-Web, goes on to the services.
#[derive(Debug, Clone, Copy)]
pub struct Console;

impl Answers for Console {
    fn answer<B>(&self, request: &Request<B>) -> Option<Response<tonic::body::Body>> {
        console_response(request)
    }
}

/// The console's answer to `request`, or `None` when it is not the console's.
fn console_response<B>(request: &Request<B>) -> Option<Response<tonic::body::Body>> {
    let head = match *request.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => return None,
    };
    let path = request.uri().path();
    if path == "/" || path == "/console" {
        return Some(redirect(CONSOLE_PATH));
    }
    if !path.starts_with(CONSOLE_PATH) {
        return None;
    }
    let Some((asset, etag)) = Asset::find(path) else {
        return Some(plain(StatusCode::NOT_FOUND, "no such console file\n"));
    };
    let fresh = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .is_some_and(|tags| tags.as_bytes() == etag.as_bytes());
    let (status, body) = match (fresh, head) {
        (true, _) => (StatusCode::NOT_MODIFIED, Bytes::new()),
        (false, true) => (StatusCode::OK, Bytes::new()),
        (false, false) => (StatusCode::OK, Bytes::from_static(asset.body)),
    };
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, asset.content_type)
        .header(header::ETAG, etag)
        .header(header::CACHE_CONTROL, "no-cache");
    if status == StatusCode::OK {
        response = response.header(header::CONTENT_LENGTH, asset.body.len());
    }
    Some(
        secured(response)
            .body(body_of(body))
            .expect("a valid response"),
    )
}

/// Where the receipts' public keys are published (docs/approvals.md).
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// Serves the JWK Set of the keys that sign receipts at [`JWKS_PATH`] (404 when the
/// server signs none); every other request goes on.
#[derive(Debug, Clone)]
pub struct Jwks {
    published: Option<Bytes>,
}

impl Jwks {
    /// `published`: the JWK Set as JSON, if the server signs receipts.
    pub fn new(published: Option<String>) -> Self {
        Self {
            published: published.map(Bytes::from),
        }
    }
}

impl Answers for Jwks {
    fn answer<B>(&self, request: &Request<B>) -> Option<Response<tonic::body::Body>> {
        if request.uri().path() != JWKS_PATH || request.method() != Method::GET {
            return None;
        }
        Some(match &self.published {
            None => plain(
                StatusCode::NOT_FOUND,
                "this server signs no receipts (--receipt-key-file)\n",
            ),
            Some(keys) => secured(Response::builder().status(StatusCode::OK))
                .header(header::CONTENT_TYPE, "application/jwk-set+json")
                .header(header::CACHE_CONTROL, "max-age=300")
                .body(body_of(keys.clone()))
                .expect("a valid response"),
        })
    }
}

/// Headers every console response carries: the page loads only its own files, talks
/// only to its own origin, and is not framed by other sites.
pub(crate) fn secured(response: http::response::Builder) -> http::response::Builder {
    response
        .header(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        )
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
}

fn redirect(to: &'static str) -> Response<tonic::body::Body> {
    secured(Response::builder().status(StatusCode::PERMANENT_REDIRECT))
        .header(header::LOCATION, to)
        .body(body_of(Bytes::new()))
        .expect("a valid response")
}

pub(crate) fn plain(status: StatusCode, text: &'static str) -> Response<tonic::body::Body> {
    secured(Response::builder().status(status))
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(body_of(Bytes::from_static(text.as_bytes())))
        .expect("a valid response")
}

pub(crate) fn body_of(bytes: Bytes) -> tonic::body::Body {
    tonic::body::Body::new(Full::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Request<()> {
        Request::get(path).body(()).expect("request")
    }

    #[test]
    fn origins_parse_as_browsers_send_them() {
        assert_eq!(CorsOrigins::parse(&[]), Ok(CorsOrigins::SameOrigin));
        assert_eq!(CorsOrigins::parse(&["*".into()]), Ok(CorsOrigins::Any));
        assert_eq!(
            CorsOrigins::parse(&[
                "https://App.Example.com".into(),
                "http://localhost:5173".into()
            ]),
            Ok(CorsOrigins::List(vec![
                HeaderValue::from_static("https://app.example.com"),
                HeaderValue::from_static("http://localhost:5173"),
            ]))
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/",
            "https://app.example.com/console",
            "ftp://app.example.com",
            "https://",
        ] {
            let error = CorsOrigins::parse(&[bad.into()]).expect_err(bad);
            assert!(error.contains("is not an origin"), "{bad}: {error}");
        }
        assert!(CorsOrigins::parse(&["*".into(), "https://a.example".into()]).is_err());
    }

    #[test]
    fn the_console_serves_its_files_and_leaves_everything_else_to_grpc() {
        for path in ["/console/", "/console/index.html"] {
            let response = console_response(&get(path)).expect(path);
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_eq!(
                response.headers()[header::CONTENT_TYPE],
                ASSETS[0].content_type
            );
        }
        let js = console_response(&get("/console/console.js")).expect("js");
        assert_eq!(
            js.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        for path in ["/", "/console"] {
            let response = console_response(&get(path)).expect(path);
            assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
            assert_eq!(response.headers()[header::LOCATION], CONSOLE_PATH);
        }
        let missing = console_response(&get("/console/nope.js")).expect("404");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        let grpc = Request::post("/askgate.v1.UserQuestions/Ask")
            .body(())
            .expect("request");
        assert!(
            console_response(&grpc).is_none(),
            "gRPC goes to the services"
        );
        assert!(console_response(&get("/askgate.v1.UserQuestions/Ask")).is_none());
    }

    #[test]
    fn a_known_etag_gets_not_modified() {
        let first = console_response(&get("/console/console.js")).expect("js");
        let etag = first.headers()[header::ETAG].clone();
        let again = Request::get("/console/console.js")
            .header(header::IF_NONE_MATCH, etag)
            .body(())
            .expect("request");
        let response = console_response(&again).expect("js");
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
    }
}
