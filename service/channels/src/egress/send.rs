//! One HTTP POST to an endpoint, as a tenant's untrusted URL deserves: the host is
//! resolved here and every address checked before connecting (no loopback, private,
//! link-local or otherwise internal address unless the operator allows them, and the
//! checked address is the one connected to, so a DNS answer cannot change between the
//! check and the connection); no redirect is followed; the whole attempt has a
//! deadline; at most [`MAX_RESPONSE_BYTES`] of the response are read.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
};
use tokio_rustls::TlsConnector;

/// Bytes of a response body read (and dropped): enough to keep the connection
/// well-behaved, never more.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024;

/// Longest endpoint URL accepted.
pub const MAX_URL_BYTES: usize = 2048;

/// An endpoint URL taken apart: `http` or `https`, a host, a port, a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    pub host: String,
    pub port: u16,
    pub uri: Uri,
}

impl Target {
    /// Parses an endpoint URL; the error says what is wrong with it.
    pub fn parse(url: &str) -> Result<Self, String> {
        if url.len() > MAX_URL_BYTES {
            return Err(format!("must be at most {MAX_URL_BYTES} bytes"));
        }
        let uri: Uri = url.parse().map_err(|_| "is not a valid URL".to_owned())?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("must be an http:// or https:// URL".into()),
        };
        let authority = uri.authority().ok_or("must name a host")?;
        if authority.as_str().contains('@') {
            return Err("must not carry credentials".into());
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err("must name a host".into());
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Self {
            https,
            host,
            port,
            uri,
        })
    }
}

/// Whether an address is one a tenant's webhook may not reach by default: anything
/// IANA's registries do not make globally reachable (this machine, private and shared
/// networks, link-local cloud metadata, the other special-purpose blocks, and IPv6
/// outside global unicast); see [`super::special_purpose`].
pub fn is_internal(ip: IpAddr) -> bool {
    !super::special_purpose::is_global(ip)
}

/// Sends webhook requests.
#[derive(Clone)]
pub struct Sender {
    tls: TlsConnector,
    allow_internal: bool,
    timeout: Duration,
    /// Bytes of a response body read at most.
    max_response: usize,
}

impl Sender {
    pub fn new(allow_internal: bool, timeout: Duration) -> Self {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Self {
            tls: TlsConnector::from(Arc::new(config)),
            allow_internal,
            timeout,
            max_response: MAX_RESPONSE_BYTES,
        }
    }

    /// Reads response bodies up to `bytes` (a longer one is dropped whole).
    pub fn with_max_response(mut self, bytes: usize) -> Self {
        self.max_response = bytes;
        self
    }

    /// The addresses of `target` that may be connected to: an error when it resolves
    /// to none, or to an internal one (unless allowed).
    pub async fn resolve(&self, target: &Target) -> Result<Vec<SocketAddr>, String> {
        let addrs: Vec<SocketAddr> = match target.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, target.port)],
            Err(_) => tokio::net::lookup_host((target.host.as_str(), target.port))
                .await
                .map_err(|e| format!("cannot resolve {}: {e}", target.host))?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(format!("{} resolves to no address", target.host));
        }
        if !self.allow_internal && addrs.iter().any(|a| is_internal(a.ip())) {
            return Err(format!(
                "not a public address (a server with --webhook-allow-private allows it): {} \
                 resolves to a loopback, private or otherwise internal address",
                target.host
            ));
        }
        Ok(addrs)
    }

    /// POSTs `body` with `headers` (JSON unless they give a `content-type`); the
    /// response's status and (the start of) its body, or what went wrong.
    pub async fn post(
        &self,
        target: &Target,
        headers: &[(&'static str, String)],
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let mut map = http::HeaderMap::new();
        for (name, value) in headers {
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|e| format!("invalid {name} header: {e}"))?;
            map.append(*name, value);
        }
        self.post_headers(target, map, body).await
    }

    /// [`Self::post`] with the headers as a map.
    pub async fn post_headers(
        &self,
        target: &Target,
        headers: http::HeaderMap,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), String> {
        self.timed(self.send(http::Method::POST, target, headers, body))
            .await
    }

    /// GETs `target`: the response's status and (the start of) its body.
    pub async fn get(&self, target: &Target) -> Result<(http::StatusCode, Bytes), String> {
        self.timed(self.send(
            http::Method::GET,
            target,
            http::HeaderMap::new(),
            Bytes::new(),
        ))
        .await
    }

    async fn timed(
        &self,
        exchange: impl Future<Output = Result<(http::StatusCode, Bytes), String>>,
    ) -> Result<(http::StatusCode, Bytes), String> {
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("timed out after {:?}", self.timeout)),
        }
    }

    async fn send(
        &self,
        method: http::Method,
        target: &Target,
        headers: http::HeaderMap,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let addrs = self.resolve(target).await?;
        let mut last_error = String::new();
        let mut tcp = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    tcp = Some(stream);
                    break;
                }
                Err(e) => last_error = format!("connect {addr}: {e}"),
            }
        }
        let tcp = tcp.ok_or(last_error)?;
        let _ = tcp.set_nodelay(true);
        let path = target
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let host = match target.uri.port() {
            Some(port) => format!("{}:{port}", target.uri.host().unwrap_or_default()),
            None => target.uri.host().unwrap_or_default().to_owned(),
        };
        let typed = headers.contains_key(header::CONTENT_TYPE);
        let posting = method == http::Method::POST;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, host);
        if posting && !typed {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        request = request.header(
            header::USER_AGENT,
            concat!("askgate-webhooks/", env!("CARGO_PKG_VERSION")),
        );
        if let Some(all) = request.headers_mut() {
            all.extend(headers);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| format!("invalid request: {e}"))?;
        if target.https {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| format!("invalid TLS name {}: {e}", target.host))?;
            let tls = self
                .tls
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            exchange(tls, request, self.max_response).await
        } else {
            exchange(tcp, request, self.max_response).await
        }
    }
}

/// One HTTP/1.1 request on a fresh connection.
async fn exchange<IO>(
    io: IO,
    request: Request<Full<Bytes>>,
    max_response: usize,
) -> Result<(http::StatusCode, Bytes), String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    let connection = tokio::spawn(connection);
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        let status = response.status();
        // A bounded body: a webhook's is not used, the Slack API's is a JSON object.
        let body = Limited::new(response.into_body(), max_response)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Ok((status, body))
    }
    .await;
    connection.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
        ] {
            assert!(is_internal(ip.parse().expect(ip)), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_internal(ip.parse().expect(ip)), "{ip}");
        }
    }

    #[test]
    fn urls_are_parsed_and_bad_ones_refused() {
        let t = Target::parse("https://hooks.example.com/in?x=1").expect("valid");
        assert_eq!(
            (t.https, t.host.as_str(), t.port),
            (true, "hooks.example.com", 443)
        );
        let t = Target::parse("http://[::1]:8080/x").expect("valid");
        assert_eq!((t.https, t.host.as_str(), t.port), (false, "::1", 8080));
        for bad in [
            "ftp://example.com/",
            "example.com/x",
            "https://user:pw@example.com/",
            "not a url",
            "",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
        assert!(Target::parse(&format!("https://e.com/{}", "a".repeat(MAX_URL_BYTES))).is_err());
    }

    #[tokio::test]
    async fn internal_hosts_are_refused_unless_allowed() {
        let target = Target::parse("http://127.0.0.1:9/").expect("valid");
        let strict = Sender::new(false, Duration::from_secs(5));
        assert!(strict.resolve(&target).await.is_err());
        let localhost = Target::parse("http://localhost:9/").expect("valid");
        assert!(strict.resolve(&localhost).await.is_err());
        let open = Sender::new(true, Duration::from_secs(5));
        assert!(open.resolve(&target).await.is_ok());
    }
}
