//! gRPC-Web without a browser: tonic-web's client layer over hyper's HTTP/1.1 client
//! reaches the same services on the same listener, unary calls and the Subscribe
//! server stream alike.

use askgate_client::{Ask, question};
use askgate_proto::v1::{
    ListPendingRequest, SubscribeRequest, subscribe_response::Event as Wire,
    user_questions_client::UserQuestionsClient,
};
use hyper_util::{client::legacy::Client as HttpClient, rt::TokioExecutor};
use tonic_web::GrpcWebClientLayer;

use crate::support::{TestServer, within};

async fn grpc_web_serves_unary_calls_and_the_subscribe_stream() {
    let server = TestServer::start().await;
    // A `UserQuestions` client speaking gRPC-Web over HTTP/1.1.
    let http1 = HttpClient::builder(TokioExecutor::new())
        .build_http::<tonic_web::GrpcWebCall<tonic::body::Body>>();
    let service = tower::ServiceBuilder::new()
        .layer(GrpcWebClientLayer::new())
        .service(http1);
    let origin = server.url().parse().expect("the server's url");
    let mut web = UserQuestionsClient::with_origin(service, origin);

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
