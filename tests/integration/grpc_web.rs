//! gRPC-Web without a browser: tonic-web's client layer over hyper's HTTP/1.1 client
//! reaches the same services on the same listener, unary calls and the Subscribe
//! server stream alike.

use askgate_client::{Ask, question};
use askgate_proto::v1::{ListPendingRequest, SubscribeRequest, subscribe_response::Event as Wire};

use askgate_server::server::HttpConfig;
use askgate_server::{server::ServerConfig, web::CorsOrigins};

use crate::support::{TestServer, http1, test_config, web_client, within};

async fn grpc_web_serves_unary_calls_and_the_subscribe_stream() {
    let server = TestServer::start().await;
    // A `UserQuestions` client speaking gRPC-Web over HTTP/1.1.
    let mut web = web_client(&server);

    // A server stream over HTTP/1.1: the replay, then live events.
    let mut events = web
        .subscribe(SubscribeRequest {
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("subscribe over gRPC-Web")
        .into_inner();
    let first = within("synced", events.message()).await.expect("a message");
    assert!(
        matches!(first.and_then(|m| m.event), Some(Wire::Synced(_))),
        "the stream starts with synced"
    );
    let mut agent = server.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(Ask::new("s").question(question("q", "Go?").choice("yes")))
            .await
    });
    let requested = within("requested", events.message())
        .await
        .expect("a message")
        .and_then(|m| m.event);
    let Some(Wire::Requested(requested)) = requested else {
        panic!("expected requested, got {requested:?}");
    };

    // A unary call over HTTP/1.1 sees the same state.
    let pending = web
        .list_pending(ListPendingRequest {
            session_id: "s".into(),
        })
        .await
        .expect("list pending over gRPC-Web")
        .into_inner()
        .pending;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].rpc_id, requested.rpc_id);
    let mut answerer = server.client().await;
    answerer
        .answer(
            "s",
            &requested.rpc_id,
            vec![askgate_client::answer::select("q", ["yes"])],
        )
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
}
on_every_backend!(
    #[tokio::test]
    grpc_web_serves_unary_calls_and_the_subscribe_stream
);

/// What a browser sends before a cross-origin gRPC-Web call from `origin`.
fn preflight(server: &TestServer, origin: &str) -> http::request::Builder {
    http::Request::options(format!(
        "{}/askgate.v1.UserQuestions/Subscribe",
        server.url()
    ))
    .header("origin", origin)
    .header("access-control-request-method", "POST")
    .header(
        "access-control-request-headers",
        "authorization,content-type,x-grpc-web,x-user-agent,traceparent,tracestate",
    )
}

#[tokio::test]
async fn cors_admits_the_configured_origins_only() {
    let config = ServerConfig {
        http: HttpConfig {
            cors: CorsOrigins::parse(&["https://app.example".into()]).expect("an origin"),
            ..test_config().http
        },
        ..test_config()
    };
    let server = TestServer::start_with(config).await;

    let allowed = http1(preflight(&server, "https://app.example")).await;
    assert!(allowed.status().is_success(), "{:?}", allowed.status());
    let header = |name: &str| {
        allowed
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    assert_eq!(header("access-control-allow-origin"), "https://app.example");
    assert!(header("access-control-allow-methods").contains("post"));
    for name in [
        "authorization",
        "content-type",
        "x-grpc-web",
        "x-user-agent",
        "traceparent",
        "tracestate",
    ] {
        assert!(
            header("access-control-allow-headers").contains(name),
            "the preflight allows {name}: {:?}",
            allowed.headers()
        );
    }

    let refused = http1(preflight(&server, "https://evil.example")).await;
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none(),
        "another origin is not admitted: {:?}",
        refused.headers()
    );

    // The call itself: its response lets the page read the gRPC status.
    let call = http::Request::post(format!(
        "{}/askgate.v1.UserQuestions/ListPending",
        server.url()
    ))
    .header("origin", "https://app.example")
    .header("content-type", "application/grpc-web+proto")
    .header("x-grpc-web", "1");
    let response = http1(call).await;
    let exposed = response
        .headers()
        .get("access-control-expose-headers")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        assert!(exposed.contains(name), "{name} is exposed: {exposed:?}");
    }
}

#[tokio::test]
async fn without_cors_origins_only_the_same_origin_is_served() {
    let server = TestServer::start().await;
    let response = http1(preflight(&server, "https://app.example")).await;
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none(),
        "no origin is admitted by default: {:?}",
        response.headers()
    );
}

#[tokio::test]
async fn the_console_is_served_on_the_api_listener_unless_turned_off() {
    let server = TestServer::start().await;
    let page = http1(http::Request::get(format!("{}/console/", server.url()))).await;
    assert_eq!(page.status(), http::StatusCode::OK);
    let html = String::from_utf8_lossy(page.body());
    assert!(
        html.contains("console.js"),
        "the page loads the console: {html}"
    );
    let script = http1(http::Request::get(format!(
        "{}/console/console.js",
        server.url()
    )))
    .await;
    assert_eq!(script.status(), http::StatusCode::OK);
    assert!(!script.body().is_empty());

    let off = TestServer::start_with(ServerConfig {
        http: HttpConfig {
            console: false,
            ..test_config().http
        },
        ..test_config()
    })
    .await;
    let page = http1(http::Request::get(format!("{}/console/", off.url()))).await;
    assert_ne!(
        page.status(),
        http::StatusCode::OK,
        "--console off serves no page"
    );
}
