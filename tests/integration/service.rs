//! What operators and tools rely on besides the API: grpc.health.v1 and server
//! reflection (v1 and v1alpha), so grpcurl and ghz work without a .proto file.

use tokio_stream::StreamExt;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tonic_reflection::pb::{v1, v1alpha};

use crate::support::{TestServer, within};

async fn channel(server: &TestServer) -> Channel {
    within(
        "connect",
        Endpoint::from_shared(server.url()).expect("url").connect(),
    )
    .await
    .expect("connect")
}

const SERVICES: [&str; 3] = [
    "askgate.v1.UserQuestions",
    "askgate.v1.Agents",
    "grpc.health.v1.Health",
];

async fn health_reports_serving() {
    let server = TestServer::start().await;
    let mut health = HealthClient::new(channel(&server).await);
    for service in ["", "askgate.v1.UserQuestions"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("check")
            .into_inner();
        assert_eq!(status.status(), ServingStatus::Serving, "{service:?}");
    }
}
on_every_backend!(
    #[tokio::test]
    health_reports_serving
);

/// Asks a reflection service (v1 or v1alpha: the same messages in two packages) for
/// its service list.
macro_rules! listed_services {
    ($version:ident, $server:expr) => {{
        use $version::{
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let mut client =
            $version::server_reflection_client::ServerReflectionClient::new(channel($server).await);
        let request = $version::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut responses = client
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .expect("reflection")
            .into_inner();
        let response = within("reflection", responses.next())
            .await
            .expect("a response")
            .expect("ok");
        let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
            panic!("expected a service list");
        };
        list.service
            .into_iter()
            .map(|s| s.name)
            .collect::<Vec<String>>()
    }};
}

fn assert_lists_what_is_served(names: &[String]) {
    for service in SERVICES {
        assert!(
            names.iter().any(|n| n == service),
            "{service} missing from {names:?}"
        );
    }
}

async fn reflection_v1_lists_the_services() {
    let server = TestServer::start().await;
    assert_lists_what_is_served(&listed_services!(v1, &server));
}
on_every_backend!(
    #[tokio::test]
    reflection_v1_lists_the_services
);

async fn reflection_v1alpha_lists_the_services() {
    let server = TestServer::start().await;
    assert_lists_what_is_served(&listed_services!(v1alpha, &server));
}
on_every_backend!(
    #[tokio::test]
    reflection_v1alpha_lists_the_services
);
