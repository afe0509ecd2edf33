//! The second hardening round (an outside attack on the HTTP entries): each test sends
//! what the attacker sent and checks that it is refused now.

use std::net::SocketAddr;

use askgate_client::{Ask, question};
use askgate_proto::v1::{ListPendingRequest, user_questions_client::UserQuestionsClient};
use askgate_server::server::HttpConfig;
use askgate_server::{ServerConfig, origin::PublicUrl, server::AuthConfig};
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{
    ServeProcess, TempDir, TestServer, next_requested, subscribed, test_config, within,
};

/// The status code and body of one HTTP/1.1 request written as is (`head` without the
/// blank line that ends it) with `body`, on a fresh connection.
pub async fn http1(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let (status, _, body) = http1_full(addr, head, body).await;
    (status, body)
}

/// [`http1`] with the response's head (status line and headers) as text.
pub async fn http1_full(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
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
    let (head, body) = match response.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => (
            String::from_utf8_lossy(&response[..at]).into_owned(),
            response[at + 4..].to_vec(),
        ),
        None => (text.into_owned(), Vec::new()),
    };
    (status, head, body)
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
        http: HttpConfig {
            public_url: Some(PublicUrl::parse("https://askgate.example.com").expect("url")),
            ..test_config().http
        },
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

/// A key of `tenant` for `sub` with `roles`, added to the keys file in `dir` by
/// `askgate keys add`; the key.
fn add_key(dir: &TempDir, tenant: &str, sub: &str, roles: &str) -> String {
    let keys = dir.0.join("keys.json");
    let out = std::process::Command::new(crate::support::ASKGATE)
        .args(["keys", "add", "--file"])
        .arg(&keys)
        .args(["--tenant", tenant, "--sub", sub, "--roles", roles])
        .output()
        .expect("askgate keys add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// An MCP client speaking raw streamable HTTP, as an attacker would.
struct Mcp {
    addr: SocketAddr,
    key: String,
    session: &'static str,
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

impl Mcp {
    /// `method` on /mcp with `body`, naming the MCP session `id` if given, plus `extra`
    /// header lines: (status, response head, body).
    async fn send(
        &self,
        method: &str,
        id: Option<&str>,
        extra: &str,
        body: &str,
    ) -> (u16, String, String) {
        let named = id
            .map(|id| format!("\r\nmcp-session-id: {id}"))
            .unwrap_or_default();
        let head = format!(
            "{method} /mcp HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\n\
             askgate-session: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18{named}{extra}",
            self.addr, self.key, self.session
        );
        let (status, head, body) = http1_full(self.addr, &head, body.as_bytes()).await;
        (status, head, String::from_utf8_lossy(&body).into_owned())
    }

    /// Opens an MCP session; its id, or the refusal's status and body.
    async fn open(&self) -> Result<String, (u16, String)> {
        let (status, head, body) = self.send("POST", None, "", INITIALIZE).await;
        let id = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        });
        let Some(id) = id.filter(|_| status == 200) else {
            return Err((status, body));
        };
        let (status, _, _) = self.send("POST", Some(&id), "", INITIALIZED).await;
        assert_eq!(status, 202, "initialized");
        Ok(id)
    }

    async fn list_tools(&self, id: &str) -> u16 {
        self.send("POST", Some(id), "", LIST_TOOLS).await.0
    }
}

/// A server with API keys in `dir`, on the test's backend, with `config` otherwise;
/// on Redis also a second node sharing its state (`None` on memory), for the budgets
/// that count over every node.
async fn keyed_nodes(dir: &TempDir, config: ServerConfig) -> (TestServer, Option<TestServer>) {
    let config = ServerConfig {
        auth: AuthConfig::Keys(dir.0.join("keys.json")),
        ..config
    };
    let server = TestServer::start_with(config.clone()).await;
    let peer = server.start_peer_with(config).await;
    (server, peer)
}

/// Clients with `key` on `server` and on its peer (the same node again on memory).
async fn clients_of(
    server: &TestServer,
    peer: &Option<TestServer>,
    key: &str,
) -> (askgate_client::Client, askgate_client::Client) {
    let here = server.client().await.with_token(key).expect("token");
    let there = match peer {
        Some(peer) => peer.client().await.with_token(key).expect("token"),
        None => here.clone(),
    };
    (here, there)
}

/// An MCP session belongs to who opened it: another tenant's key, or another subject
/// of the same tenant, naming its id can neither use it, nor resume its stream, nor
/// delete it; it gets 404 as for a session that does not exist.
async fn an_mcp_session_belongs_to_who_opened_it() {
    let dir = TempDir::new();
    let a = add_key(&dir, "acme", "worker", "agent");
    let teammate = add_key(&dir, "acme", "intern", "agent");
    let b = add_key(&dir, "globex", "eve", "agent");
    let (server, _) = keyed_nodes(&dir, test_config()).await;
    let owner = Mcp {
        addr: server.addr,
        key: a.clone(),
        session: "team-a/1",
    };
    let id = owner.open().await.expect("A opens a session");
    assert_eq!(owner.list_tools(&id).await, 200);

    for (who, key, session) in [
        ("another tenant", b.as_str(), "team-a/1"),
        ("another subject", teammate.as_str(), "team-a/1"),
        ("another askgate session", a.as_str(), "team-b/1"),
    ] {
        let thief = Mcp {
            addr: server.addr,
            key: key.to_owned(),
            session,
        };
        assert_eq!(thief.list_tools(&id).await, 404, "{who}: tools/list");
        let (status, _, _) = thief
            .send("GET", Some(&id), "\r\nlast-event-id: 0/0", "")
            .await;
        assert_eq!(status, 404, "{who}: resume");
        let (status, _, _) = thief.send("DELETE", Some(&id), "", "").await;
        assert_eq!(status, 404, "{who}: delete");
        // As for an id nobody has.
        assert_eq!(thief.list_tools("no-such-session").await, 404, "{who}");
    }
    assert_eq!(owner.list_tools(&id).await, 200, "still the owner's");
    let (status, _, _) = owner.send("DELETE", Some(&id), "", "").await;
    // 200, as the MCP SDKs expect of a closed session (rmcp says 202).
    assert_eq!(status, 200, "the owner deletes it");
    assert_eq!(owner.list_tools(&id).await, 404, "gone");
}
on_every_backend!(
    #[tokio::test]
    an_mcp_session_belongs_to_who_opened_it
);

/// A tenant may hold `--max-mcp-sessions-per-tenant` MCP sessions over every node; past
/// it `initialize` gets 429 naming the limit, another tenant is not affected, and a
/// deleted session gives its place back.
async fn mcp_sessions_are_capped_per_tenant() {
    let dir = TempDir::new();
    let a = add_key(&dir, "acme", "worker", "agent");
    let b = add_key(&dir, "globex", "eve", "agent");
    let mut config = test_config();
    config.settings.max_mcp_sessions_per_tenant = 3;
    // On Redis the budget is shared: a second node counts the same sessions.
    let (server, peer) = keyed_nodes(&dir, config).await;
    let addrs = [server.addr, peer.as_ref().map_or(server.addr, |p| p.addr)];
    let mut opened = Vec::new();
    for i in 0..3 {
        let mcp = Mcp {
            addr: addrs[i % 2],
            key: a.clone(),
            session: "s",
        };
        opened.push((mcp.addr, mcp.open().await.expect("within the budget")));
    }
    for addr in addrs {
        let over = Mcp {
            addr,
            key: a.clone(),
            session: "s",
        };
        let (status, body) = over.open().await.expect_err("over the budget");
        assert_eq!(status, 429, "{body}");
        assert!(body.contains("--max-mcp-sessions-per-tenant"), "{body}");
    }
    let other = Mcp {
        addr: server.addr,
        key: b,
        session: "s",
    };
    other
        .open()
        .await
        .expect("another tenant has its own budget");
    let (addr, id) = opened.pop().expect("a session");
    let owner = Mcp {
        addr,
        key: a.clone(),
        session: "s",
    };
    let (status, _, _) = owner.send("DELETE", Some(&id), "", "").await;
    assert!((200..300).contains(&status), "{status}");
    let again = Mcp {
        addr: server.addr,
        key: a,
        session: "s",
    };
    crate::support::eventually("the deleted session's place", || async {
        again.open().await.ok()
    })
    .await;
}
on_every_backend!(
    #[tokio::test]
    mcp_sessions_are_capped_per_tenant
);

/// An MCP `initialize` whose `clientInfo.name` is 3 MiB: rmcp logs the client's info
/// at INFO, and every value a log line holds is cut, so the line stays small.
#[tokio::test]
async fn a_huge_client_name_writes_a_small_log_line() {
    // rmcp's INFO lines are on only when the filter names it.
    let serve = ServeProcess::start_with(&["--log", "info,rmcp=info"]).await;
    let addr = serve.addr();
    let name = "n".repeat(3 * 1024 * 1024);
    let initialize = INITIALIZE.replace(r#""name":"probe""#, &format!(r#""name":"{name}""#));
    let mcp = Mcp {
        addr,
        key: String::new(),
        session: "s",
    };
    let (status, head, _) = mcp.send("POST", None, "", &initialize).await;
    assert_eq!(status, 200, "{head}");
    let id = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session")
        .to_owned();
    let (status, _, _) = mcp.send("POST", Some(&id), "", INITIALIZED).await;
    assert_eq!(status, 202);
    crate::support::eventually("rmcp's log line of the client's info", || async {
        serve.logged("initialized as server").then_some(())
    })
    .await;
    let longest = serve.longest_log_line();
    println!("a 3 MiB clientInfo.name: longest log line {longest} bytes");
    assert!(longest < 8 * 1024, "{longest} bytes");
}

/// One tenant opening MCP sessions as fast as it can stops at the default budget (256);
/// the test prints what each session holds, and so what the budget bounds a tenant to.
#[tokio::test]
async fn a_tenant_opening_mcp_sessions_stops_at_its_budget() {
    let serve = ServeProcess::start().await;
    let addr = serve.addr();
    let mcp = Mcp {
        addr,
        key: String::new(),
        session: "s",
    };
    let budget = askgate_server::backend::StateConfig::default().max_mcp_sessions_per_tenant;
    // Warm up what every session shares (rmcp's and the allocator's first pages).
    let warm = mcp.open().await.expect("a session");
    let before = serve.rss().expect("rss");
    for _ in 1..budget {
        mcp.open().await.expect("within the budget");
    }
    let after = serve.rss().expect("rss");
    let (status, body) = mcp.open().await.expect_err("over the budget");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("--max-mcp-sessions-per-tenant"), "{body}");
    let each = after.saturating_sub(before) / (budget as u64 - 1);
    println!(
        "MCP sessions: {each} bytes of RSS each; the default budget of {budget} bounds a \
         tenant at {:.1} MiB per deployment",
        (each * budget as u64) as f64 / (1024.0 * 1024.0)
    );
    // The budget comes back with a deleted session.
    let (status, _, _) = mcp.send("DELETE", Some(&warm), "", "").await;
    assert!((200..300).contains(&status), "{status}");
    mcp.open().await.expect("the deleted session's place");
}

/// A tenant's Subscribe streams, of one session or all, are counted over every node;
/// past `--max-streams-per-tenant` the next is refused TOO_MANY_SUBSCRIBERS naming the
/// limit, another tenant is not affected, and a closed stream gives its place back.
async fn subscribe_streams_are_capped_per_tenant() {
    use askgate_client::Reason;
    use askgate_proto::v1::SubscribeRequest;

    let dir = TempDir::new();
    let a = add_key(&dir, "acme", "ui", "ui");
    let b = add_key(&dir, "globex", "ui", "ui");
    let mut config = test_config();
    config.settings.max_streams_per_tenant = 4;
    let (server, peer) = keyed_nodes(&dir, config).await;
    let (client_a, peer_a) = clients_of(&server, &peer, &a).await;
    let all = SubscribeRequest {
        all_sessions: true,
        ..Default::default()
    };
    let mut open = Vec::new();
    for i in 0..3 {
        let mut client = if i % 2 == 0 {
            client_a.clone()
        } else {
            peer_a.clone()
        };
        open.push(subscribed(&mut client, &format!("s{i}")).await);
    }
    let mut peer_client = peer_a.clone();
    let last = within("subscribe", peer_client.subscribe(all.clone()))
        .await
        .expect("the fourth stream");
    for mut client in [client_a.clone(), peer_a.clone()] {
        let Err(refused) = client.subscribe_session("s9").await else {
            panic!("over the budget, a stream opened");
        };
        assert_eq!(refused.reason(), Reason::TooManySubscribers, "{refused:?}");
        assert!(
            refused.message().contains("--max-streams-per-tenant"),
            "{refused}"
        );
    }
    let mut other = server.client().await.with_token(&b).expect("token");
    subscribed(&mut other, "s0").await;
    drop(last);
    let again = client_a.clone();
    crate::support::eventually("the closed stream's place", || {
        let mut client = again.clone();
        async move { client.subscribe_session("s9").await.ok() }
    })
    .await;
    // The first three held their places until here.
    drop(open);
}
on_every_backend!(
    #[tokio::test]
    subscribe_streams_are_capped_per_tenant
);

/// A tenant opening idle Subscribe streams stops at its budget; the test prints what
/// each stream holds, and so what the default budget (10,000) bounds a tenant to.
#[tokio::test]
async fn a_tenant_opening_streams_stops_at_its_budget() {
    const STREAMS: usize = 2_000;
    let serve = ServeProcess::start_with(&["--max-streams-per-tenant", &STREAMS.to_string()]).await;
    let mut client = serve.client().await;
    // Warm up what every stream shares.
    let mut open = vec![subscribed(&mut client, "warm").await];
    let before = serve.rss().expect("rss");
    for i in 1..STREAMS {
        open.push(subscribed(&mut client, &format!("s{}", i % 100)).await);
    }
    let after = serve.rss().expect("rss");
    let Err(refused) = client.subscribe_session("one-more").await else {
        panic!("over the budget, a stream opened");
    };
    assert_eq!(refused.reason(), askgate_client::Reason::TooManySubscribers);
    let each = after.saturating_sub(before) / (STREAMS as u64 - 1);
    let default = askgate_server::backend::StateConfig::default().max_streams_per_tenant as u64;
    println!(
        "Subscribe streams: {each} bytes of RSS each; the default budget of {default} \
         bounds a tenant at {:.1} MiB per deployment",
        (each * default) as f64 / (1024.0 * 1024.0)
    );
}

/// How long until the server closes `stream` (its read returns end of file or an
/// error); fails after [`crate::support::WAIT`].
async fn closed_after(mut stream: tokio::net::TcpStream) -> std::time::Duration {
    let started = std::time::Instant::now();
    let mut byte = [0u8; 1];
    within("the server to close the connection", async {
        loop {
            match stream.read(&mut byte).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    started.elapsed()
}

/// A connection that sends nothing is closed after --idle-timeout, while a blocked Ask
/// and a gRPC-Web Subscribe stream, quiet for longer than that, are not. The test
/// prints how long the silent connections stayed open.
#[tokio::test]
async fn silent_connections_are_closed_and_requests_in_flight_are_not() {
    use askgate_proto::v1::SubscribeRequest;
    use hyper_util::{client::legacy::Client as HttpClient, rt::TokioExecutor};

    let idle = std::time::Duration::from_millis(500);
    let mut config = test_config();
    config.transport.connections.idle_timeout = idle;
    config.transport.keepalive_interval = std::time::Duration::from_millis(100);
    let server = TestServer::start_with(config).await;

    // An Ask in flight, and a browser's Subscribe over HTTP/1.1 with no events.
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let http1 = HttpClient::builder(TokioExecutor::new())
        .build_http::<tonic_web::GrpcWebCall<tonic::body::Body>>();
    let web = tower::ServiceBuilder::new()
        .layer(tonic_web::GrpcWebClientLayer::new())
        .service(http1);
    let mut web = UserQuestionsClient::with_origin(web, server.url().parse().expect("url"));
    let mut quiet = web
        .subscribe(SubscribeRequest {
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("subscribe over gRPC-Web")
        .into_inner();
    within("synced", quiet.message()).await.expect("synced");
    let mut agent = server.client().await;
    let ask = tokio::spawn(async move {
        agent
            .ask(Ask::new("s").question(question("q", "Go?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    within("the web stream's requested", quiet.message())
        .await
        .expect("requested");

    let silent: Vec<_> = futures_util::future::join_all(
        (0..50).map(|_| tokio::net::TcpStream::connect(server.addr)),
    )
    .await
    .into_iter()
    .map(|s| s.expect("connect"))
    .collect();
    let open_for = futures_util::future::join_all(silent.into_iter().map(closed_after)).await;
    let longest = open_for.iter().max().expect("some");
    println!("50 silent connections closed after at most {longest:?} (--idle-timeout {idle:?})");
    assert!(*longest >= idle, "not before the timeout: {longest:?}");

    // Both quiet calls outlived the silent connections and are served.
    ui.answer(
        "s",
        &rpc_id,
        vec![askgate_client::answer::select("q", ["yes"])],
    )
    .await
    .expect("answer");
    within("the ask", ask)
        .await
        .expect("join")
        .expect("answered");
    within("the web stream's resolved", quiet.message())
        .await
        .expect("resolved");
}

/// HTTP/2 connections that open no stream are closed after --idle-timeout even while
/// they PING (and answer the node's PINGs): four of them cannot hold a node with
/// --max-connections 4 (before, 30 such connections filled 30 places until they left,
/// and `askgate health` failed meanwhile).
#[tokio::test]
async fn http2_connections_that_only_ping_are_closed() {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

    let idle = std::time::Duration::from_millis(700);
    let mut config = test_config();
    config.transport.connections.idle_timeout = idle;
    config.transport.connections.max_connections = 4;
    config.transport.keepalive_interval = std::time::Duration::from_millis(100);
    let server = TestServer::start_with(config).await;
    let mut pinging = Vec::new();
    for _ in 0..4 {
        // Before the connection: the node's idle clock starts when it accepts, which
        // is before the handshake is done here.
        let started = std::time::Instant::now();
        let stream = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(std::time::Duration::from_millis(100))
            .keep_alive_while_idle(true)
            .handshake::<_, http_body_util::Empty<bytes::Bytes>>(TokioIo::new(stream))
            .await
            .expect("an HTTP/2 handshake");
        pinging.push(tokio::spawn(async move {
            let _sender = sender;
            let _ = connection.await;
            started.elapsed()
        }));
    }
    for connection in pinging {
        let open_for = within("the node to close a pinging connection", connection)
            .await
            .expect("join");
        assert!(open_for >= idle, "not before the timeout: {open_for:?}");
    }
    let mut client = askgate_client::Client::connect(server.url())
        .await
        .expect("a place again");
    client.list_pending("s").await.expect("served");
}

/// Past --max-connections a new connection is closed at once (and counted); a place
/// comes back when a connection closes.
#[tokio::test]
async fn past_max_connections_a_connection_is_closed_at_once() {
    let mut config = test_config();
    config.transport.connections.max_connections = 10;
    let server = TestServer::start_with_metrics(config).await;
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(
            tokio::net::TcpStream::connect(server.addr)
                .await
                .expect("connect"),
        );
    }
    let refused = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let open_for = closed_after(refused).await;
    println!("the 11th connection was closed after {open_for:?}");
    let metrics = server.metrics_addr.expect("metrics");
    let (_, body) = http1(metrics, "GET /metrics HTTP/1.1\r\nhost: 127.0.0.1", b"").await;
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("askgate_refused_connections_total 1"),
        "{text}"
    );
    assert!(text.contains("askgate_connections 10"), "{text}");
    held.pop();
    crate::support::eventually("a place for a client", || async {
        let mut client = askgate_client::Client::connect(server.url()).await.ok()?;
        client.list_pending("s").await.ok()
    })
    .await;
}

/// With descriptors run out (the process limited to 64), the node backs off instead of
/// spinning on accept, and serves again once idle connections are closed. The test
/// prints the CPU the node used while starved.
#[tokio::test]
async fn out_of_descriptors_the_node_waits_instead_of_spinning() {
    let dir = TempDir::new();
    let wrapper = dir.file(
        "askgate-64",
        format!(
            "#!/bin/sh\nulimit -n 64 || exit 1\nexec {} \"$@\"\n",
            crate::support::ASKGATE
        ),
    );
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let serve = askgate_testing::ServeProcess::spawn(&wrapper, &["--idle-timeout", "2s"])
        .await
        .expect("askgate serve under ulimit -n 64");
    let addr = serve.addr();
    let mut flood = Vec::new();
    for _ in 0..100 {
        flood.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    }
    crate::support::eventually("the node to run out of descriptors", || async {
        serve.logged("cannot accept connections").then_some(())
    })
    .await;
    let cpu_before = serve.cpu().expect("cpu");
    let window = std::time::Duration::from_millis(1000);
    tokio::time::sleep(window).await;
    let used = serve.cpu().expect("cpu") - cpu_before;
    println!("out of descriptors: the node used {used:?} of CPU in {window:?}");
    assert!(used < window / 2, "spinning: {used:?} in {window:?}");
    // The idle connections are closed, and the node serves again.
    drop(flood);
    crate::support::eventually("the node to serve again", || async {
        let mut client = askgate_client::Client::connect(serve.url.clone())
            .await
            .ok()?;
        client.list_pending("s").await.ok()
    })
    .await;
}

/// Many connections each holding an unfinished body on /slack/interactivity, the one
/// entry that must read a body before it can authenticate it: the node reads at most
/// 64 such bodies at once, each for at most 10 s, and closes the rest. The test prints
/// the node's peak RSS growth and how long the connections stayed open.
#[tokio::test]
async fn unfinished_slack_bodies_hold_a_bounded_amount_of_memory() {
    use tokio::io::AsyncWriteExt as _;

    const CONNECTIONS: usize = 500;
    const SENT: usize = 200 * 1024;
    let serve = ServeProcess::start().await;
    let addr = serve.addr();
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let head = format!(
        "POST /slack/interactivity HTTP/1.1\r\nhost: {addr}\r\n\
         content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\
         x-slack-request-timestamp: {timestamp}\r\nx-slack-signature: v0={}\r\n\r\n",
        256 * 1024,
        "ab".repeat(32)
    );
    let before = serve.rss().expect("rss");
    let started = std::time::Instant::now();
    let mut open = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let head = head.clone();
        open.push(tokio::spawn(async move {
            let _ = stream.write_all(head.as_bytes()).await;
            // Most of the body, then nothing: the write may block once the node
            // stops reading.
            let _ = tokio::time::timeout(crate::support::WAIT, stream.write_all(&vec![b'x'; SENT]))
                .await;
            closed_after(stream).await
        }));
    }
    let mut peak = 0;
    let mut all = futures_util::future::join_all(open);
    let open_for = within("the node to close every connection", async {
        loop {
            tokio::select! {
                done = &mut all => return done,
                () = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                    peak = peak.max(serve.rss().expect("rss").saturating_sub(before));
                }
            }
        }
    })
    .await;
    let longest = open_for
        .into_iter()
        .map(|t| t.expect("join"))
        .max()
        .expect("some");
    let peak_mib = peak as f64 / (1024.0 * 1024.0);
    println!(
        "{CONNECTIONS} unfinished 256 KiB Slack bodies: peak RSS growth {peak_mib:.1} MiB; \
         all closed after {longest:?} ({:?} in all)",
        started.elapsed()
    );
    assert!(peak_mib < 64.0, "{peak_mib:.1} MiB");
}

/// An ask of `session` whose detail is `bytes` long, held while nobody follows.
fn sized_ask(session: &str, bytes: usize) -> Ask {
    Ask::new(session)
        .question(
            question("q", "Go?")
                .detail(&"x".repeat(bytes))
                .choice("yes"),
        )
        .hold_unattended()
        .no_retry()
}

/// What pending asks hold is budgeted per session and per tenant, over every node:
/// past a budget an ask is refused TOO_MANY_PENDING naming the limit, another tenant is
/// not affected, and a resolved ask gives its bytes back.
async fn pending_asks_are_held_to_a_byte_budget() {
    use askgate_client::Reason;

    let dir = TempDir::new();
    let a = add_key(&dir, "acme", "agent", "agent,ui");
    let b = add_key(&dir, "globex", "agent", "agent");
    let mut config = test_config();
    config.settings.max_pending_bytes_per_session = 100_000;
    config.settings.max_pending_bytes_per_tenant = 150_000;
    let (server, peer) = keyed_nodes(&dir, config).await;
    let (client_a, peer_a) = clients_of(&server, &peer, &a).await;
    let held = |client: &askgate_client::Client, ask: Ask| {
        let mut client = client.clone();
        tokio::spawn(async move { client.ask(ask).await })
    };
    let pending = |session: &'static str| {
        let mut client = client_a.clone();
        async move { client.list_pending(session).await.expect("list").len() }
    };
    let mut calls = vec![held(&client_a, sized_ask("s1", 60_000))];
    crate::support::eventually("the first ask", || async {
        (pending("s1").await == 1).then_some(())
    })
    .await;
    // The session's budget: 60 KB held, 60 KB more do not fit.
    let refused = peer_a
        .clone()
        .ask(sized_ask("s1", 60_000))
        .await
        .expect_err("over the session's budget");
    assert_eq!(refused.reason(), Reason::TooManyPending, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("--max-pending-bytes-per-session"),
        "{refused}"
    );
    // The tenant's budget, counted over both nodes: 60 + 60 KB fit, 60 more do not.
    calls.push(held(&peer_a, sized_ask("s2", 60_000)));
    crate::support::eventually("the second ask", || async {
        (pending("s2").await == 1).then_some(())
    })
    .await;
    let refused = client_a
        .clone()
        .ask(sized_ask("s3", 60_000))
        .await
        .expect_err("over the tenant's budget");
    assert_eq!(refused.reason(), Reason::TooManyPending, "{refused:?}");
    assert!(
        refused.message().contains("--max-pending-bytes-per-tenant"),
        "{refused}"
    );
    // Another tenant has its own budget.
    let other = server.client().await.with_token(&b).expect("token");
    calls.push(held(&other, sized_ask("s1", 60_000)));
    // A resolved ask gives its bytes back.
    let rpc_id = client_a.clone().list_pending("s1").await.expect("list")[0]
        .rpc_id
        .clone();
    client_a
        .clone()
        .cancel("s1", &rpc_id, "")
        .await
        .expect("cancel");
    crate::support::eventually("room for another ask", || async {
        let mut client = client_a.clone();
        let ask = sized_ask("s3", 60_000).timeout(std::time::Duration::from_millis(200));
        match client.ask(ask).await {
            Err(e) if e.reason() == Reason::TooManyPending => None,
            _ => Some(()),
        }
    })
    .await;
    for call in calls {
        call.abort();
    }
}
on_every_backend!(
    #[tokio::test]
    pending_asks_are_held_to_a_byte_budget
);

/// The attack that took a node: one tenant holding asks of about 1 MiB each. With the
/// budget (64 MiB here, to keep the test small; 256 MiB by default) the node refuses
/// the asks past it; the test prints how many it held and what they cost in RSS.
#[tokio::test]
async fn a_tenant_holding_huge_asks_stops_at_its_byte_budget() {
    const BUDGET: u64 = 64 * 1024 * 1024;
    let serve = ServeProcess::start_with(&[
        "--max-pending-bytes-per-tenant",
        &BUDGET.to_string(),
        "--max-pending-bytes-per-session",
        &BUDGET.to_string(),
    ])
    .await;
    let client = serve.client().await;
    let before = serve.rss().expect("rss");
    let mut held = Vec::new();
    let refused = loop {
        // 16 questions of 64 KiB details each: about 1 MiB, each in a session of its
        // own (a listing of several would pass the client's message limit).
        let session = format!("big-{}", held.len());
        let mut ask = Ask::new(&session).hold_unattended().no_retry();
        for i in 0..16 {
            ask = ask.question(
                question(&format!("q{i}"), "Go?")
                    .detail(&"x".repeat(64 * 1024 - 64))
                    .choice("yes"),
            );
        }
        let mut call = client.clone();
        let task = tokio::spawn(async move { call.ask(ask).await });
        let admitted = crate::support::eventually("the ask held or refused", || {
            let mut lister = client.clone();
            let task = &task;
            let session = session.clone();
            async move {
                if task.is_finished() {
                    return Some(false);
                }
                let pending = lister.list_pending(&session).await.ok()?;
                (!pending.is_empty()).then_some(true)
            }
        })
        .await;
        if !admitted {
            break task.await.expect("join").expect_err("refused");
        }
        held.push(task);
        assert!(held.len() <= 70, "the budget did not hold");
    };
    assert_eq!(
        refused.reason(),
        askgate_client::Reason::TooManyPending,
        "{refused:?}"
    );
    let grown = serve.rss().expect("rss").saturating_sub(before);
    println!(
        "asks of ~1 MiB: {} held within a {} MiB budget, then TOO_MANY_PENDING; RSS grew \
         {:.1} MiB ({:.2}× the budget)",
        held.len(),
        BUDGET / (1024 * 1024),
        grown as f64 / (1024.0 * 1024.0),
        grown as f64 / BUDGET as f64
    );
    for task in held {
        task.abort();
    }
}
