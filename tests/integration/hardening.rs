//! The second hardening round (an outside attack on the HTTP entries): each test sends
//! what the attacker sent and checks that it is refused now.

use std::net::SocketAddr;

use askgate_client::{Ask, question};
use askgate_proto::v1::{ListPendingRequest, user_questions_client::UserQuestionsClient};
use askgate_service::{ServerConfig, origin::PublicUrl};
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{TestServer, next_requested, subscribed, test_config, within};

/// The status code and body of one HTTP/1.1 request written as is (`head` without the
/// blank line that ends it) with `body`, on a fresh connection.
pub async fn http1(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut response = Vec::new();
    within("the response", stream.read_to_end(&mut response))
        .await
        .expect("read");
    let text = String::from_utf8_lossy(&response);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    let body = match response.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => response[at + 4..].to_vec(),
        None => Vec::new(),
    };
    (status, body)
}

/// A gRPC-Web ListPending of `session`, as a browser's fetch sends it.
fn grpc_web_list_pending(host: &str, origin: Option<&str>) -> (String, Vec<u8>) {
    let message = ListPendingRequest {
        session_id: "claude-code/s1".into(),
    }
    .encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend((message.len() as u32).to_be_bytes());
    frame.extend(message);
    let origin = origin
        .map(|o| format!("\r\norigin: {o}"))
        .unwrap_or_default();
    let head = format!(
        "POST /askgate.v1.UserQuestions/ListPending HTTP/1.1\r\nhost: {host}{origin}\r\n\
         content-type: application/grpc-web+proto\r\nx-grpc-web: 1"
    );
    (head, frame)
}

/// DNS rebinding: a page on `attacker.example`, re-bound to 127.0.0.1, calls the
/// anonymous loopback server from the developer's browser. It read and answered Claude
/// Code's "Allow Claude to use Bash?" through gRPC-Web; now every entry refuses a Host
/// that is not this machine's, and a browser Origin that is not the page's own server.
#[tokio::test]
async fn a_rebound_web_page_reaches_no_entry() {
    let server = TestServer::start().await;
    let port = server.addr.port();
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "claude-code/s1").await;
    let mut agent = server.client().await;
    let ask =
        tokio::spawn(async move {
            agent
                .ask(Ask::new("claude-code/s1").question(
                    question("permission", "Allow Claude to use Bash?").choice("Allow once"),
                ))
                .await
        });
    next_requested(&mut events).await;

    let attacker = format!("attacker.example:{port}");
    let attacker_origin = format!("http://{attacker}");
    let own = format!("127.0.0.1:{port}");
    let own_origin = format!("http://{own}");

    // gRPC-Web: a rebound Host, or another origin's page on the right Host.
    for (host, origin) in [
        (attacker.as_str(), Some(attacker_origin.as_str())),
        (attacker.as_str(), None),
        (own.as_str(), Some(attacker_origin.as_str())),
        (own.as_str(), Some("null")),
    ] {
        let (head, body) = grpc_web_list_pending(host, origin);
        let (status, body) = http1(server.addr, &head, &body).await;
        assert_eq!(status, 403, "Host {host}, Origin {origin:?}");
        assert!(
            !String::from_utf8_lossy(&body).contains("Allow Claude"),
            "nothing of the question leaks"
        );
    }
    // The console's own calls still work.
    let (head, body) = grpc_web_list_pending(&own, Some(&own_origin));
    let (status, body) = http1(server.addr, &head, &body).await;
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("Allow Claude to use Bash?"));

    // The console, /mcp, and Slack's entry.
    for head in [
        format!("GET /console/ HTTP/1.1\r\nhost: {attacker}"),
        format!(
            "POST /mcp HTTP/1.1\r\nhost: {attacker}\r\naskgate-session: claude-code/s1\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream"
        ),
        format!(
            "POST /slack/interactivity HTTP/1.1\r\nhost: {attacker}\r\n\
             content-type: application/x-www-form-urlencoded"
        ),
        format!(
            "POST /mcp HTTP/1.1\r\nhost: {own}\r\norigin: {attacker_origin}\r\naskgate-session: s"
        ),
    ] {
        let (status, _) = http1(server.addr, &head, b"{}").await;
        assert_eq!(status, 403, "{head}");
    }
    let (status, _) = http1(
        server.addr,
        &format!("GET /console/ HTTP/1.1\r\nhost: {own}"),
        b"",
    )
    .await;
    assert_eq!(status, 200);

    // Native gRPC naming another authority.
    let channel = tonic::transport::Endpoint::from_shared(server.url())
        .expect("endpoint")
        .origin(format!("http://{attacker}").parse().expect("uri"))
        .connect()
        .await
        .expect("connect");
    let refused = UserQuestionsClient::new(channel)
        .list_pending(ListPendingRequest {
            session_id: "claude-code/s1".into(),
        })
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");

    // The question is still waiting for its human.
    let pending = ui.list_pending("claude-code/s1").await.expect("list");
    assert_eq!(pending.len(), 1);
    ask.abort();
}

/// Behind a proxy that keeps the public Host, `--public-url`'s host and origin are
/// accepted on the loopback listener.
#[tokio::test]
async fn the_public_url_is_accepted_on_a_loopback_listener() {
    let server = TestServer::start_with(ServerConfig {
        public_url: Some(PublicUrl::parse("https://askgate.example.com").expect("url")),
        ..test_config()
    })
    .await;
    let (head, body) =
        grpc_web_list_pending("askgate.example.com", Some("https://askgate.example.com"));
    let (status, _) = http1(server.addr, &head, &body).await;
    assert_eq!(status, 200);
    let (head, body) = grpc_web_list_pending("askgate.example.org", None);
    let (status, _) = http1(server.addr, &head, &body).await;
    assert_eq!(status, 403);
}
