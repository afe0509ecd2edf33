//! One Host/Origin policy in front of every HTTP entry on the listener (gRPC, gRPC-Web,
//! the console, `/mcp`, `/slack/…`): the first layer a request meets, before anything
//! reads its body.
//!
//! - On a loopback listener the `Host` (or HTTP/2 `:authority`) must name this machine
//!   (`localhost`, `*.localhost`, a loopback or unspecified address) or the
//!   `--public-url`'s host. A web page on a name that an attacker re-bound to 127.0.0.1
//!   (DNS rebinding) sends its own name as `Host`, and is refused here: without this a
//!   page could answer a local agent's questions (approve Claude Code's Bash).
//! - On any listener a request that carries an `Origin` (a browser's) is refused unless
//!   the origin is the request's own host (the console), the `--public-url`'s origin, or
//!   one of the `--allowed-origin` values.
//!
//! Requests without `Origin` are not browsers' (gRPC clients, Slack, curl) and need only
//! pass the Host check. A refusal is `403 Forbidden` with a one-line text body.

use std::net::IpAddr;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header, uri::Authority};
use http_body_util::Full;

use crate::{
    domain::error::bounded,
    web::{Answers, CorsOrigins},
};

/// `--public-url`: the URL people and services outside reach this node by (behind a
/// proxy, the proxy's). Its host is accepted as `Host` on a loopback listener, and its
/// origin as `Origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `scheme://host[:port]`, lower case, as browsers send `Origin`.
    origin: HeaderValue,
    /// The host alone, lower case, without brackets or port.
    host: String,
}

impl PublicUrl {
    /// Parses `scheme://host[:port][/path]` (http or https).
    pub fn parse(value: &str) -> Result<Self, String> {
        let invalid = || {
            format!(
                "--public-url {value:?} is not an http(s) URL: give it as \
                 https://askgate.example.com"
            )
        };
        let uri: http::Uri = value.parse().map_err(|_| invalid())?;
        let (Some(scheme @ ("http" | "https")), Some(authority)) =
            (uri.scheme_str(), uri.authority())
        else {
            return Err(invalid());
        };
        if authority.as_str().contains('@') {
            return Err(invalid());
        }
        let origin = format!("{scheme}://{}", authority.as_str()).to_ascii_lowercase();
        Ok(Self {
            origin: HeaderValue::from_str(&origin).map_err(|_| invalid())?,
            host: bare_host(authority).to_ascii_lowercase(),
        })
    }

    /// The origin, `scheme://host[:port]`.
    pub fn origin(&self) -> &str {
        self.origin.to_str().unwrap_or_default()
    }
}

/// What the policy accepts; built once per node.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    /// Check `Host` (the listener is on loopback).
    loopback: bool,
    public_url: Option<PublicUrl>,
    allowed: CorsOrigins,
}

impl OriginPolicy {
    pub fn new(loopback: bool, public_url: Option<PublicUrl>, allowed: CorsOrigins) -> Self {
        Self {
            loopback,
            public_url,
            allowed,
        }
    }

    /// Why `request` is refused, or `None` when it may go on.
    pub fn refusal<B>(&self, request: &Request<B>) -> Option<&'static str> {
        let host = request_authority(request);
        if self.loopback {
            let accepted = match &host {
                // HTTP/1.0 without Host: no browser sends that.
                None => true,
                Some(host) => self.accepts_host(host),
            };
            if !accepted {
                return Some("this server answers only to its loopback names and --public-url\n");
            }
        }
        let origin = request.headers().get(header::ORIGIN)?;
        match self.accepts_origin(origin, host.as_ref()) {
            true => None,
            false => Some("requests from this web origin are not allowed\n"),
        }
    }

    fn accepts_host(&self, host: &Authority) -> bool {
        let name = bare_host(host);
        if let Ok(ip) = name.parse::<IpAddr>() {
            return ip.is_loopback() || ip.is_unspecified();
        }
        let suffix = ".localhost";
        name.eq_ignore_ascii_case("localhost")
            || (name.len() > suffix.len()
                && name.is_char_boundary(name.len() - suffix.len())
                && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix))
            || self
                .public_url
                .as_ref()
                .is_some_and(|url| url.host.eq_ignore_ascii_case(name))
    }

    fn accepts_origin(&self, origin: &HeaderValue, host: Option<&Authority>) -> bool {
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let origin = origin.to_ascii_lowercase();
        // The page's own server: the console, served from this listener.
        let same = origin
            .split_once("://")
            .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
            .zip(host)
            .is_some_and(|((_, authority), host)| authority.eq_ignore_ascii_case(host.as_str()));
        same || self
            .public_url
            .as_ref()
            .is_some_and(|url| url.origin() == origin)
            || match &self.allowed {
                CorsOrigins::SameOrigin => false,
                CorsOrigins::Any => true,
                CorsOrigins::List(list) => list.iter().any(|allowed| allowed == origin.as_str()),
            }
    }
}

/// The authority a request names: HTTP/2's `:authority` (in the URI) or HTTP/1.1's
/// `Host`.
fn request_authority<B>(request: &Request<B>) -> Option<Authority> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.clone());
    }
    let host = request.headers().get(header::HOST)?;
    // An unparsable Host names nothing this server is: refused on loopback.
    Some(
        Authority::try_from(host.as_bytes())
            .unwrap_or_else(|_| Authority::from_static("invalid.invalid")),
    )
}

/// The host of an authority without its port and IPv6 brackets.
fn bare_host(authority: &Authority) -> &str {
    let host = authority.host();
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

impl Answers for OriginPolicy {
    /// A refusal, before anything reads the request's body.
    fn answer<B>(&self, request: &Request<B>) -> Option<Response<tonic::body::Body>> {
        let why = self.refusal(request)?;
        tracing::debug!(
            host = request_authority(request)
                .map(|a| bounded(a.as_str()).to_string())
                .unwrap_or_default(),
            "refused by the host/origin policy"
        );
        Some(refused(request, why))
    }
}

/// `403 Forbidden` saying `why`; to a native gRPC client, PERMISSION_DENIED as a
/// gRPC status, which it reads as such (a browser's gRPC-Web call sees the 403).
fn refused<B>(request: &Request<B>, why: &'static str) -> Response<tonic::body::Body> {
    let grpc = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.starts_with("application/grpc") && !t.starts_with("application/grpc-web")
        });
    if grpc {
        return tonic::Status::permission_denied(why.trim_end()).into_http();
    }
    let mut response = Response::new(tonic::body::Body::new(Full::new(Bytes::from_static(
        why.as_bytes(),
    ))));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(host: &str, origin: Option<&str>) -> Request<()> {
        let mut builder =
            Request::post("/askgate.v1.UserQuestions/ListPending").header("host", host);
        if let Some(origin) = origin {
            builder = builder.header("origin", origin);
        }
        builder.body(()).expect("request")
    }

    fn loopback(public: Option<&str>, allowed: CorsOrigins) -> OriginPolicy {
        OriginPolicy::new(
            true,
            public.map(|url| PublicUrl::parse(url).expect("url")),
            allowed,
        )
    }

    #[test]
    fn a_loopback_listener_answers_only_to_loopback_names() {
        let policy = loopback(None, CorsOrigins::SameOrigin);
        for host in [
            "127.0.0.1:50051",
            "localhost:50051",
            "LOCALHOST",
            "app.localhost:1",
            "[::1]:50051",
            "127.8.0.1",
            "0.0.0.0:50051",
        ] {
            assert_eq!(policy.refusal(&request(host, None)), None, "{host}");
        }
        for host in [
            "attacker.example:50051",
            "localhost.attacker.example",
            "10.0.0.1:50051",
            "not a host",
        ] {
            assert!(policy.refusal(&request(host, None)).is_some(), "{host}");
        }
        let open = OriginPolicy::new(false, None, CorsOrigins::SameOrigin);
        assert_eq!(open.refusal(&request("askgate.internal:50051", None)), None);
    }

    #[test]
    fn the_public_url_host_and_origin_are_accepted() {
        let policy = loopback(
            Some("https://Askgate.Example.com/base"),
            CorsOrigins::SameOrigin,
        );
        assert_eq!(policy.refusal(&request("askgate.example.com", None)), None);
        assert_eq!(
            policy.refusal(&request(
                "askgate.example.com",
                Some("https://askgate.example.com")
            )),
            None
        );
        assert!(
            policy
                .refusal(&request("127.0.0.1:1", Some("http://askgate.example.com")))
                .is_some(),
            "another scheme is another origin"
        );
        for bad in [
            "askgate.example.com",
            "ftp://a.example",
            "https://u:p@a.example",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn browsers_are_refused_unless_their_origin_is_allowed() {
        let policy = loopback(None, CorsOrigins::SameOrigin);
        // The console, on its own server.
        assert_eq!(
            policy.refusal(&request("127.0.0.1:50051", Some("http://127.0.0.1:50051"))),
            None
        );
        for origin in [
            "http://attacker.example:50051",
            "http://localhost:3000",
            "null",
            "http://127.0.0.1:50052",
        ] {
            assert!(
                policy
                    .refusal(&request("127.0.0.1:50051", Some(origin)))
                    .is_some(),
                "{origin}"
            );
        }
        let listed = loopback(
            None,
            CorsOrigins::parse(&["http://localhost:3000".into()]).expect("origins"),
        );
        assert_eq!(
            listed.refusal(&request("127.0.0.1:50051", Some("http://localhost:3000"))),
            None
        );
        let any = OriginPolicy::new(false, None, CorsOrigins::Any);
        assert_eq!(
            any.refusal(&request("a.example", Some("https://b.example"))),
            None
        );
        let open = OriginPolicy::new(false, None, CorsOrigins::SameOrigin);
        assert!(
            open.refusal(&request("a.example", Some("https://b.example")))
                .is_some()
        );
    }
}
