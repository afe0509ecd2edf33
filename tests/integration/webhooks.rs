//! Webhooks and reminders through real servers and a real receiver: a Python HTTP
//! server (tests/webhooks/receiver.py) that verifies every signature with the Standard
//! Webhooks reference library and answers as each test scripts it (errors, hangs,
//! dropped connections, or not running at all).

use std::{
    collections::HashMap,
    time::{Duration, SystemTime},
};

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::{CreateEndpointRequest, DeliveryStatus, ListDeliveriesRequest};
use askgate_server::{
    ServerConfig,
    auth::jwt::{Audience, Claims, DEFAULT_GROUPS_CLAIM, KeySource},
    backend::hooks::StoreLimits,
    channels::delivery::WebhookConfig,
    server::AuthConfig,
};
use askgate_testing::RedisServer;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::support::{
    ServeProcess, TempDir, TestServer, WAIT, eventually, helper_command, next_event, test_config,
    until_synced, within,
};

/// One request the receiver got.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Received {
    path: String,
    /// `webhook-id`.
    pub(crate) id: String,
    /// When it arrived (seconds since the epoch, the receiver's clock).
    at: f64,
    /// How the receiver answered: "ok", a status, "hang" or "close".
    answered: String,
    pub(crate) verified: bool,
    error: Option<String>,
    /// The verified JSON payload.
    payload: Option<Value>,
}

impl Received {
    pub(crate) fn event_type(&self) -> &str {
        self.payload
            .as_ref()
            .and_then(|p| p["type"].as_str())
            .unwrap_or("")
    }

    fn data(&self) -> &Value {
        self.payload.as_ref().map_or(&Value::Null, |p| &p["data"])
    }

    pub(crate) fn rpc_id(&self) -> &str {
        self.data()["rpcId"].as_str().unwrap_or("")
    }
}

/// The receiver process, killed when dropped.
pub(crate) struct Receiver {
    child: tokio::process::Child,
    port: u16,
}

impl Receiver {
    pub(crate) async fn start() -> Self {
        Self::start_on(0).await
    }

    async fn start_on(port: u16) -> Self {
        let mut child = helper_command("webhooks/receiver.py")
            .args(["--port", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn the webhook receiver");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        within(
            "the receiver to listen",
            tokio::io::BufReader::new(stdout).read_line(&mut line),
        )
        .await
        .expect("the receiver's first line");
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the receiver said {line:?}"));
        Self { child, port }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn stop(mut self) {
        self.child.kill().await.expect("kill the receiver");
    }

    /// How `path` answers: its secret, and a script of answers ("ok", a status,
    /// "hang", "close"), then "ok".
    pub(crate) async fn configure(&self, path: &str, secret: &str, script: &[&str]) {
        let body = serde_json::json!({"path": path, "secret": secret, "script": script});
        http(self.port, "POST", "/_control/paths", Some(body)).await;
    }

    pub(crate) async fn received(&self) -> Vec<Received> {
        serde_json::from_value(http(self.port, "GET", "/_control/received", None).await)
            .expect("the receiver's record")
    }

    /// Waits until the receiver holds a request `matching`; every request so far.
    pub(crate) async fn wait_for(
        &self,
        what: &str,
        matching: impl Fn(&Received) -> bool,
    ) -> Vec<Received> {
        eventually(what, || async {
            let received = self.received().await;
            received.iter().any(&matching).then_some(received)
        })
        .await
    }
}

/// One HTTP/1.1 request to 127.0.0.1:`port`; the response's JSON body.
async fn http(port: u16, method: &str, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        std::io::Result::Ok(response)
    };
    let response = within("the receiver to answer", exchange)
        .await
        .expect("the receiver answers");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).expect("JSON")
}

/// Short retries and timeouts, and endpoints allowed on loopback.
fn webhook_config() -> WebhookConfig {
    WebhookConfig {
        allow_private: true,
        retry_initial: Duration::from_millis(200),
        retry_max: Duration::from_secs(2),
        retry_for: Duration::from_secs(60),
        timeout: Duration::from_secs(1),
        poll: Duration::from_millis(50),
        ..WebhookConfig::default()
    }
}

fn hook_server_config() -> ServerConfig {
    ServerConfig {
        webhooks: webhook_config(),
        ..test_config()
    }
}

fn endpoint(url: String, events: &[&str]) -> CreateEndpointRequest {
    CreateEndpointRequest {
        url,
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        ..Default::default()
    }
}

async fn deliveries(client: &mut Client, endpoint_id: &str) -> Vec<askgate_proto::v1::Delivery> {
    client
        .list_deliveries(ListDeliveriesRequest {
            endpoint_id: endpoint_id.to_owned(),
            ..Default::default()
        })
        .await
        .expect("list deliveries")
}

/// Asks in `session` on its own task; the task's result is the call's.
fn ask_in_background(
    mut client: Client,
    ask: Ask,
) -> tokio::task::JoinHandle<Result<askgate_proto::v1::AskResponse, askgate_client::Error>> {
    tokio::spawn(async move { client.ask(ask).await })
}

fn one_question(session: &str) -> Ask {
    Ask::new(session)
        .question(question("q", "Deploy?").option("yes", "").option("no", ""))
        .timeout(WAIT * 3)
}

/// docs/webhooks.md: an ask on a session nobody follows is held for the endpoint (it
/// provides), which gets `ask.requested` and `ask.resolved` signed per Standard
/// Webhooks, each once; event and label filters choose what an endpoint gets.
async fn signed_events_reach_the_endpoints_that_want_them() {
    let server = TestServer::start_with(hook_server_config()).await;
    let receiver = Receiver::start().await;
    let mut admin = server.client().await;
    let all = admin
        .create_endpoint(endpoint(receiver.url("/all"), &[]))
        .await
        .expect("create an endpoint");
    assert!(all.secret.starts_with("whsec_"), "{}", all.secret);
    assert!(all.provides, "an endpoint that gets ask.requested provides");
    let infra = admin
        .create_endpoint(CreateEndpointRequest {
            labels: HashMap::from([("team".into(), "infra".into())]),
            ..endpoint(receiver.url("/infra"), &["ask.resolved"])
        })
        .await
        .expect("create a filtered endpoint");
    assert!(!infra.provides);
    receiver.configure("/all", &all.secret, &[]).await;
    receiver.configure("/infra", &infra.secret, &[]).await;
    let listed = admin.list_endpoints().await.expect("list endpoints");
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|e| e.secret.is_empty()),
        "secrets are shown once"
    );

    // Nobody follows "s", but the endpoint provides: the ask (if_unattended FAIL, the
    // default) is held instead of failing NO_PROVIDER.
    let asking = ask_in_background(
        server.client().await,
        one_question("s").label("team", "infra"),
    );
    let received = receiver
        .wait_for("ask.requested", |r| r.event_type() == "ask.requested")
        .await;
    let requested = &received[0];
    assert!(requested.verified, "{:?}", requested.error);
    assert_eq!(requested.path, "/all");
    assert_eq!(requested.data()["sessionId"], "s");
    assert_eq!(requested.data()["questions"][0]["id"], "q");
    assert_eq!(requested.data()["labels"]["team"], "infra");
    assert!(
        requested.data()["cursor"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    assert!(requested.id.starts_with("msg_"), "{}", requested.id);
    let rpc_id = requested.rpc_id().to_owned();

    admin
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    let response = within("the ask", asking)
        .await
        .expect("task")
        .expect("answered");
    assert_eq!(response.rpc_id, rpc_id);
    receiver
        .wait_for("ask.resolved at /infra", |r| {
            r.event_type() == "ask.resolved" && r.path == "/infra"
        })
        .await;
    let received = receiver
        .wait_for("ask.resolved at /all", |r| {
            r.event_type() == "ask.resolved" && r.path == "/all"
        })
        .await;
    for r in &received {
        assert!(r.verified, "{r:?}");
        assert_eq!(r.rpc_id(), rpc_id);
    }
    let resolved = received
        .iter()
        .find(|r| r.event_type() == "ask.resolved")
        .expect("resolved");
    assert_eq!(resolved.data()["reason"], "ANSWERED");
    assert_eq!(resolved.data()["answers"][0]["selected"][0], "yes");

    // An ask without the label: /infra gets nothing of it (its delivery would have
    // been queued with /all's, in the same step).
    let asking = ask_in_background(server.client().await, one_question("s"));
    let received = receiver
        .wait_for("the second ask.requested", |r| {
            r.event_type() == "ask.requested" && r.rpc_id() != rpc_id
        })
        .await;
    let second = received
        .iter()
        .find(|r| r.event_type() == "ask.requested" && r.rpc_id() != rpc_id)
        .expect("second")
        .rpc_id()
        .to_owned();
    admin.cancel("s", &second, "not now").await.expect("cancel");
    let _ = within("the second ask", asking).await;
    eventually("the second ask.resolved delivered", || async {
        let mut admin = admin.clone();
        deliveries(&mut admin, &all.id)
            .await
            .iter()
            .any(|d| {
                d.rpc_id == second
                    && d.event_type == "ask.resolved"
                    && d.status() == DeliveryStatus::Delivered
            })
            .then_some(())
    })
    .await;
    let for_infra = deliveries(&mut admin, &infra.id).await;
    assert_eq!(for_infra.len(), 1, "{for_infra:?}");
    assert_eq!(for_infra[0].rpc_id, rpc_id);

    // Every event was delivered once, and each delivery is listed DELIVERED.
    let received = receiver.received().await;
    let mut ids: Vec<_> = received.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        received.len(),
        "a delivery arrived twice: {received:?}"
    );
    let listed = eventually("every delivery listed as delivered", || async {
        let mut admin = admin.clone();
        let listed = deliveries(&mut admin, &all.id).await;
        (listed.len() == 4
            && listed
                .iter()
                .all(|d| d.status() == DeliveryStatus::Delivered))
        .then_some(listed)
    })
    .await;
    assert!(listed.iter().all(|d| d.attempts == 1), "{listed:?}");
    server.stop().await.expect("stop");
}
on_every_backend!(
    #[tokio::test]
    signed_events_reach_the_endpoints_that_want_them
);

/// Semantics 8 with webhooks: an endpoint provides only for the asks it would get. One
/// filtered by label holds a labelled ask on a session nobody follows; an ask without
/// the label still fails NO_PROVIDER, and so does any ask once no endpoint provides.
async fn a_filtered_endpoint_provides_only_for_the_asks_it_gets() {
    let server = TestServer::start_with(hook_server_config()).await;
    let receiver = Receiver::start().await;
    let mut admin = server.client().await;
    let created = admin
        .create_endpoint(CreateEndpointRequest {
            labels: HashMap::from([("team".into(), "infra".into())]),
            ..endpoint(receiver.url("/infra"), &["ask.requested"])
        })
        .await
        .expect("create");
    assert!(created.provides);
    receiver.configure("/infra", &created.secret, &[]).await;
    let mut agent = server.client().await;
    let unlabelled = one_question("nobody").no_retry();
    let refused = agent
        .ask(unlabelled)
        .await
        .expect_err("no endpoint gets it");
    assert_eq!(refused.reason(), Reason::NoProvider);
    let _held = ask_in_background(
        server.client().await,
        one_question("nobody").label("team", "infra"),
    );
    receiver.wait_for("the labelled ask", |r| r.verified).await;
    admin.delete_endpoint(&created.id).await.expect("delete");
    let labelled = one_question("nobody").label("team", "infra").no_retry();
    let refused = agent.ask(labelled).await.expect_err("no endpoint left");
    assert_eq!(refused.reason(), Reason::NoProvider);
    server.stop().await.expect("stop");
}
on_every_backend!(
    #[tokio::test]
    a_filtered_endpoint_provides_only_for_the_asks_it_gets
);

/// At-least-once: an error status, a hang past the timeout and a dropped connection
/// are each retried, with the same webhook-id, no sooner than the backoff schedule
/// says; the metrics count the attempts by outcome.
async fn failed_attempts_are_retried_with_the_same_id_on_schedule() {
    let server = TestServer::start_with_metrics(hook_server_config()).await;
    let receiver = Receiver::start().await;
    let mut admin = server.client().await;
    let created = admin
        .create_endpoint(endpoint(receiver.url("/flaky"), &["ask.requested"]))
        .await
        .expect("create");
    receiver
        .configure("/flaky", &created.secret, &["500", "hang", "close"])
        .await;
    let _asking = ask_in_background(server.client().await, one_question("s").hold_unattended());
    // The fourth attempt is the first the script lets through.
    let attempts = eventually("four attempts", || async {
        let received = receiver.received().await;
        (received.len() >= 4).then_some(received)
    })
    .await;
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    assert!(
        attempts.iter().all(|r| r.id == attempts[0].id),
        "{attempts:?}"
    );
    assert!(attempts.iter().all(|r| r.verified), "{attempts:?}");
    // The next attempt comes no sooner than the backoff (200 ms, doubling) after the
    // failure: at once for an error status or a dropped connection, after the 1 s
    // timeout for the hang (which started a little before the request arrived here:
    // half a second is left for that).
    let gaps: Vec<f64> = attempts.windows(2).map(|w| w[1].at - w[0].at).collect();
    let least = [0.2, 0.5 + 0.4, 0.8];
    for (gap, least) in gaps.iter().zip(least) {
        assert!(
            *gap >= least - 0.02,
            "retried after {gap:.3}s, before {least}s: {gaps:?}"
        );
        assert!(
            *gap <= 2.0 * least + 3.0,
            "retried only after {gap:.3}s: {gaps:?}"
        );
    }
    let listed = eventually("the delivery delivered", || async {
        let mut admin = admin.clone();
        let listed = deliveries(&mut admin, &created.id).await;
        (listed.first()?.status() == DeliveryStatus::Delivered).then_some(listed)
    })
    .await;
    assert_eq!(
        (listed[0].attempts, listed[0].id.as_str()),
        (4, attempts[0].id.as_str())
    );
    assert!(listed[0].last_error.is_empty(), "{listed:?}");

    let metrics = scrape(server.metrics_addr.expect("metrics")).await;
    for (outcome, count) in [("retried", 3), ("delivered", 1)] {
        let line = format!("askgate_webhook_deliveries_total{{outcome=\"{outcome}\"}} {count}");
        assert!(metrics.contains(&line), "no {line:?} in\n{metrics}");
    }
    server.stop().await.expect("stop");
}
on_every_backend!(
    #[tokio::test]
    failed_attempts_are_retried_with_the_same_id_on_schedule
);

/// GETs `/metrics`.
async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = "GET /metrics HTTP/1.1\r\nHost: askgate\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    within("the scrape", stream.read_to_string(&mut response))
        .await
        .expect("response");
    response
}

/// A receiver that is down when the event happens gets it once it is up: refused
/// connections are retried like any failure.
async fn an_endpoint_that_was_down_gets_the_event_once_it_is_up() {
    let server = TestServer::start_with(hook_server_config()).await;
    let receiver = Receiver::start().await;
    let port = receiver.port;
    let url = receiver.url("/later");
    receiver.stop().await;
    let mut admin = server.client().await;
    let created = admin
        .create_endpoint(endpoint(url, &["ask.requested"]))
        .await
        .expect("create");
    let _asking = ask_in_background(server.client().await, one_question("s").hold_unattended());
    let refused = eventually("two refused attempts", || async {
        let mut admin = admin.clone();
        let listed = deliveries(&mut admin, &created.id).await;
        listed.into_iter().find(|d| d.attempts >= 2)
    })
    .await;
    assert_eq!(refused.status(), DeliveryStatus::Pending);
    assert!(refused.last_error.contains("connect"), "{refused:?}");
    assert!(refused.next_attempt_at.is_some());

    let receiver = Receiver::start_on(port).await;
    receiver.configure("/later", &created.secret, &[]).await;
    let received = receiver.wait_for("the event", |r| r.verified).await;
    let delivered = received.iter().find(|r| r.verified).expect("verified");
    assert_eq!(
        delivered.id, refused.id,
        "the same webhook-id on every attempt"
    );
    server.stop().await.expect("stop");
}
on_every_backend!(
    #[tokio::test]
    an_endpoint_that_was_down_gets_the_event_once_it_is_up
);

/// A delivery that fails for its whole retry period ends FAILED; `Redeliver` sends it
/// again with the same id, and it is then delivered.
async fn a_failed_delivery_is_redelivered() {
    let config = ServerConfig {
        webhooks: WebhookConfig {
            retry_for: Duration::from_secs(1),
            retry_max: Duration::from_millis(400),
            ..webhook_config()
        },
        ..test_config()
    };
    let server = TestServer::start_with(config).await;
    let receiver = Receiver::start().await;
    let mut admin = server.client().await;
    let created = admin
        .create_endpoint(endpoint(receiver.url("/down"), &["ask.requested"]))
        .await
        .expect("create");
    receiver
        .configure("/down", &created.secret, &["500"; 100])
        .await;
    let _asking = ask_in_background(server.client().await, one_question("s").hold_unattended());
    let failed = eventually("the delivery to fail", || async {
        let mut admin = admin.clone();
        let listed = admin
            .list_deliveries(ListDeliveriesRequest {
                status: DeliveryStatus::Failed.into(),
                ..Default::default()
            })
            .await
            .expect("list");
        listed.into_iter().next()
    })
    .await;
    assert_eq!(failed.last_error, "HTTP 500");
    assert!(failed.next_attempt_at.is_none());
    let tried = receiver.received().await.len();
    assert_eq!(tried as u32, failed.attempts);

    receiver.configure("/down", &created.secret, &[]).await;
    let again = admin.redeliver(&failed.id).await.expect("redeliver");
    assert_eq!(again.status(), DeliveryStatus::Pending);
    let received = receiver
        .wait_for("the redelivery", |r| r.answered == "ok")
        .await;
    assert_eq!(received.len(), tried + 1);
    assert!(received.iter().all(|r| r.id == failed.id && r.verified));
    eventually("the delivery delivered", || async {
        let mut admin = admin.clone();
        deliveries(&mut admin, &created.id)
            .await
            .first()
            .filter(|d| d.status() == DeliveryStatus::Delivered)
            .map(|d| assert_eq!(d.attempts, failed.attempts + 1))
    })
    .await;
    let missing = admin
        .redeliver("msg_nonexistent")
        .await
        .expect_err("unknown id");
    assert_eq!(missing.reason(), Reason::NotFound);
    server.stop().await.expect("stop");
}
on_every_backend!(
    #[tokio::test]
    a_failed_delivery_is_redelivered
);

/// Reminders arrive on their schedule, as Subscribe events and webhooks, with one
/// escalation between; nothing is sent about an ask once it is resolved.
async fn reminders_and_escalation_arrive_on_time_and_stop_at_resolution() {
    let server = TestServer::start_with(hook_server_config()).await;
    let receiver = Receiver::start().await;
    let mut admin = server.client().await;
    let created = admin
        .create_endpoint(endpoint(
            receiver.url("/nudges"),
            &["ask.reminder", "ask.escalated"],
        ))
        .await
        .expect("create");
    receiver.configure("/nudges", &created.secret, &[]).await;
    let mut events = admin.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut events).await;

    let ask = one_question("s").notify(
        Duration::from_secs(1),
        Duration::from_secs(1),
        2,
        Duration::from_millis(1500),
    );
    let _asking = ask_in_background(server.client().await, ask);
    let Event::Requested { requested, .. } = next_event(&mut events).await else {
        panic!("requested first");
    };
    assert_eq!(requested.notify.map(|n| n.max_reminders), Some(2));
    let asked_at = SystemTime::try_from(requested.requested_at.expect("stamped")).expect("time");
    let mut seen = Vec::new();
    for _ in 0..3 {
        match next_event(&mut events).await {
            Event::Reminder { reminder, .. } => {
                assert_eq!(reminder.rpc_id, requested.rpc_id);
                seen.push((format!("reminder {}", reminder.count), reminder.sent_at));
            }
            Event::Escalated { escalated, .. } => {
                assert_eq!(escalated.rpc_id, requested.rpc_id);
                seen.push(("escalated".into(), escalated.sent_at));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let kinds: Vec<_> = seen.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["reminder 1", "escalated", "reminder 2"]);
    for ((_, sent_at), due) in seen.iter().zip([1000, 1500, 2000]) {
        let sent = SystemTime::try_from(sent_at.expect("stamped")).expect("time");
        let after = sent.duration_since(asked_at).unwrap_or_default();
        assert!(
            after >= Duration::from_millis(due),
            "sent {after:?} after the ask, due at {due} ms"
        );
    }
    let received = eventually("three notices", || async {
        let received = receiver.received().await;
        (received.len() >= 3).then_some(received)
    })
    .await;
    let mut types: Vec<_> = received
        .iter()
        .map(|r| {
            assert!(r.verified, "{r:?}");
            assert_eq!(r.rpc_id(), requested.rpc_id);
            (r.event_type().to_owned(), r.data()["reminder"].as_u64())
        })
        .collect();
    types.sort();
    assert_eq!(
        types,
        [
            ("ask.escalated".to_owned(), None),
            ("ask.reminder".to_owned(), Some(1)),
            ("ask.reminder".to_owned(), Some(2)),
        ]
    );
    admin
        .cancel("s", &requested.rpc_id, "")
        .await
        .expect("cancel");

    // An ask resolved after its first reminder gets no second one: a later ask's
    // reminder, due after the first's second would have been, arrives with nothing
    // about the first before it.
    let ask = one_question("s").notify(
        Duration::from_secs(1),
        Duration::from_secs(1),
        0,
        Duration::ZERO,
    );
    let _asking = ask_in_background(server.client().await, ask);
    let first = loop {
        if let Event::Requested { requested, .. } = next_event(&mut events).await {
            break requested.rpc_id;
        }
    };
    loop {
        match next_event(&mut events).await {
            Event::Reminder { reminder, .. } if reminder.rpc_id == first => break,
            Event::Resolved { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    admin.cancel("s", &first, "").await.expect("cancel");
    let marker =
        one_question("s").notify(Duration::from_secs(2), Duration::ZERO, 1, Duration::ZERO);
    let _asking = ask_in_background(server.client().await, marker);
    loop {
        match next_event(&mut events).await {
            Event::Reminder { reminder, .. } if reminder.rpc_id != first => break,
            Event::Reminder { reminder, .. } => panic!("reminded after resolution: {reminder:?}"),
            Event::Escalated { escalated, .. } => panic!("escalated: {escalated:?}"),
            _ => {}
        }
    }
    server.stop().await.expect("stop");
}
on_every_backend!(
    #[tokio::test]
    reminders_and_escalation_arrive_on_time_and_stop_at_resolution
);

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

fn token(tenant: &str, roles: &[&str], sessions: Option<&[&str]>) -> String {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let claims = Claims {
        sub: format!("{tenant}-user"),
        tenant: tenant.into(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        sessions: sessions.map(|s| s.iter().map(|p| (*p).to_owned()).collect()),
        exp: now + 600,
        nbf: None,
        iss: None,
        aud: None::<Audience>,
    };
    let key = jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).expect("sign")
}

/// The admin API needs an admin credential of the tenant: other roles are refused,
/// another tenant's endpoints and deliveries do not exist for the caller, and the
/// per-tenant endpoint cap holds.
#[tokio::test]
async fn the_webhooks_api_is_admin_only_and_per_tenant() {
    let dir = TempDir::new();
    let config = ServerConfig {
        auth: AuthConfig::Jwt {
            key: KeySource::SecretFile(dir.file("secret", SECRET)),
            issuer: None,
            audience: None,
            groups_claim: DEFAULT_GROUPS_CLAIM.into(),
        },
        webhooks: WebhookConfig {
            limits: StoreLimits {
                max_endpoints: 2,
                ..webhook_config().limits
            },
            ..webhook_config()
        },
        ..test_config()
    };
    let server = TestServer::start_with(config).await;
    let receiver = Receiver::start().await;
    let as_ = |token: String| {
        let server = &server;
        async move { server.client().await.with_token(&token).expect("token") }
    };
    let mut admin_a = as_(token("a", &["admin"], None)).await;
    let mut admin_b = as_(token("b", &["admin"], None)).await;
    for (roles, sessions) in [
        (&["ui"][..], None),
        (&["agent"][..], None),
        (&["ui", "agent"][..], None),
        (&["admin"][..], Some(&["s*"][..])),
    ] {
        let mut client = as_(token("a", roles, sessions)).await;
        let refused = client
            .create_endpoint(endpoint(receiver.url("/x"), &[]))
            .await
            .expect_err("not an admin of the whole tenant");
        assert_eq!(
            refused.reason(),
            Reason::PermissionDenied,
            "{roles:?} {sessions:?}"
        );
        let refused = client.list_endpoints().await.expect_err("not an admin");
        assert_eq!(refused.reason(), Reason::PermissionDenied);
    }
    let ours = admin_a
        .create_endpoint(endpoint(receiver.url("/a"), &["ask.requested"]))
        .await
        .expect("create");
    receiver.configure("/a", &ours.secret, &[]).await;
    let agent_a = as_(token("a", &["agent"], None)).await;
    let _asking = ask_in_background(agent_a, one_question("s"));
    receiver.wait_for("the delivery", |r| r.verified).await;
    let delivery = eventually("the delivery listed", || async {
        let mut admin = admin_a.clone();
        deliveries(&mut admin, &ours.id).await.into_iter().next()
    })
    .await;

    assert!(admin_b.list_endpoints().await.expect("list").is_empty());
    let listed = admin_b
        .list_deliveries(ListDeliveriesRequest::default())
        .await
        .expect("list");
    assert!(listed.is_empty(), "{listed:?}");
    for refused in [
        admin_b
            .delete_endpoint(&ours.id)
            .await
            .expect_err("another tenant's"),
        admin_b
            .redeliver(&delivery.id)
            .await
            .map(|_| ())
            .expect_err("another tenant's"),
    ] {
        assert_eq!(refused.reason(), Reason::NotFound, "{refused:?}");
    }
    // Tenant b's own endpoints are capped on their own.
    for path in ["/b1", "/b2"] {
        admin_b
            .create_endpoint(endpoint(receiver.url(path), &[]))
            .await
            .expect("within b's cap");
    }
    let capped = admin_b
        .create_endpoint(endpoint(receiver.url("/b3"), &[]))
        .await
        .expect_err("over the cap");
    assert_eq!(capped.reason(), Reason::TooManyWebhooks);
    admin_a.redeliver(&delivery.id).await.expect("ours");
    admin_a.delete_endpoint(&ours.id).await.expect("delete");
    let gone = admin_a
        .delete_endpoint(&ours.id)
        .await
        .expect_err("deleted");
    assert_eq!(gone.reason(), Reason::NotFound);
    server.stop().await.expect("stop");
}

/// Endpoint URLs are checked: bad ones are refused, and by default so are hosts on
/// loopback, private, link-local (cloud metadata) and other internal addresses.
#[tokio::test]
async fn private_and_malformed_endpoint_urls_are_refused() {
    let server = TestServer::start().await;
    let mut admin = server.client().await;
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.0.0.1/hook",
        "http://192.168.1.10/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[fd00::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "ftp://example.com/hook",
        "https://user:pw@example.com/hook",
        "not a url",
    ] {
        let refused = admin
            .create_endpoint(endpoint(url.into(), &[]))
            .await
            .expect_err(url);
        assert_eq!(refused.reason(), Reason::BadRequest, "{url}: {refused:?}");
        assert_eq!(refused.violations()[0].0, "url", "{url}");
        let is_host = !url.starts_with("ftp") && !url.contains('@') && url != "not a url";
        if is_host {
            assert!(
                refused.violations()[0]
                    .1
                    .contains("--webhook-allow-private"),
                "{url}: the way out is named: {refused:?}"
            );
        }
    }
    let unknown = admin
        .create_endpoint(endpoint("https://example.com/hook".into(), &["ask.maybe"]))
        .await
        .expect_err("unknown event type");
    assert_eq!(unknown.reason(), Reason::BadRequest);
    assert_eq!(unknown.violations()[0].0, "events[0]");
    server.stop().await.expect("stop");
}

/// Three nodes on one Redis: the node making an attempt is killed (-9) while the
/// endpoint hangs; a survivor delivers once the attempt's lease is over, and no
/// attempt is made by two nodes (the event arrives exactly twice: the lost attempt
/// and the survivor's). A reminder schedule survives the death of the node that took
/// the ask. Many events through the survivors each arrive once.
#[tokio::test]
async fn on_redis_a_killed_node_loses_no_delivery_and_no_reminder() {
    let redis = RedisServer::start().await;
    let receiver = Receiver::start().await;
    let flags = [
        "--webhook-allow-private",
        "--webhook-timeout",
        "2s",
        "--webhook-retry-initial",
        "200ms",
        "--webhook-retry-max",
        "1s",
        "--redis-lease",
        "2s",
    ];
    let first = ServeProcess::redis_nodes(&redis.url, false, 1, &flags)
        .await
        .remove(0);
    let mut admin = first.client().await;
    let created = admin
        .create_endpoint(endpoint(receiver.url("/n"), &[]))
        .await
        .expect("create");
    receiver.configure("/n", &created.secret, &["hang"]).await;
    let _lost = ask_in_background(first.client().await, one_question("s").hold_unattended());
    let hanging = receiver.wait_for("the first attempt", |_| true).await;
    let id = hanging[0].id.clone();
    let survivors = ServeProcess::redis_nodes(&redis.url, false, 2, &flags).await;
    first.signal("KILL");
    let received = receiver
        .wait_for("a survivor's attempt", |r| {
            r.id == id && r.at > hanging[0].at
        })
        .await;
    assert!(received.iter().all(|r| r.verified), "{received:?}");
    let admin = survivors[0].client().await;
    let delivered = eventually("the delivery delivered", || async {
        let mut admin = admin.clone();
        deliveries(&mut admin, &created.id)
            .await
            .into_iter()
            .find(|d| d.id == id && d.status() == DeliveryStatus::Delivered)
    })
    .await;
    assert_eq!(delivered.attempts, 2, "{delivered:?}");
    let attempts = receiver
        .received()
        .await
        .iter()
        .filter(|r| r.id == id)
        .count();
    assert_eq!(attempts, 2, "{received:?}");

    // Reminders: the ask is taken by the second node, followed on the third; the
    // second dies after the first reminder and the others still come.
    let mut events = survivors[1]
        .client()
        .await
        .subscribe_session("r")
        .await
        .expect("subscribe");
    until_synced(&mut events).await;
    let ask = one_question("r")
        .reattach_grace(Duration::from_secs(60))
        .notify(
            Duration::from_secs(1),
            Duration::from_secs(1),
            3,
            Duration::ZERO,
        );
    let _held = ask_in_background(survivors[0].client().await, ask);
    let mut counts = Vec::new();
    while counts.len() < 3 {
        match next_event(&mut events).await {
            Event::Reminder { reminder, .. } => {
                counts.push(reminder.count);
                if counts.len() == 1 {
                    survivors[0].signal("KILL");
                }
            }
            Event::Requested { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(counts, [1, 2, 3]);

    // Many events through the last node: each arrives exactly once.
    let before = receiver.received().await.len();
    let mut many = Vec::new();
    for i in 0..20 {
        many.push(ask_in_background(
            survivors[1].client().await,
            one_question(&format!("many-{i}")).hold_unattended(),
        ));
    }
    let received = eventually("twenty more events", || async {
        let received = receiver.received().await;
        let many = received
            .iter()
            .filter(|r| {
                r.data()["sessionId"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("many-"))
            })
            .count();
        (many >= 20).then_some(received)
    })
    .await;
    let mut seen = HashMap::new();
    for r in &received[before..] {
        *seen.entry(r.id.as_str()).or_insert(0) += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "delivered twice: {seen:?}");
}

/// The sqlite engine: a delivery whose endpoint was down when the node was killed -9
/// goes out after the restart with the same `webhook-id`, and a reminder schedule goes
/// on.
#[tokio::test]
async fn on_sqlite_a_killed_node_loses_no_delivery_and_no_reminder() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let receiver = Receiver::start().await;
    let flags = [
        "--backend",
        "sqlite",
        "--data-dir",
        data,
        "--webhook-allow-private",
        "--webhook-timeout",
        "2s",
        "--webhook-retry-initial",
        "200ms",
        "--webhook-retry-max",
        "1s",
    ];
    let mut first = ServeProcess::start_with(&flags).await;
    let mut admin = first.client().await;
    let created = admin
        .create_endpoint(endpoint(receiver.url("/n"), &["ask.requested"]))
        .await
        .expect("create");
    receiver
        .configure(
            "/n",
            &created.secret,
            &["503", "503", "503", "503", "503", "503", "503", "503"],
        )
        .await;
    let ask = one_question("s")
        .hold_unattended()
        .request_id("kept")
        .reattach_grace(Duration::from_secs(60))
        .notify(
            Duration::from_secs(2),
            Duration::from_secs(1),
            5,
            Duration::ZERO,
        );
    let _lost = ask_in_background(first.client().await, ask);
    let refused = receiver.wait_for("a refused attempt", |_| true).await;
    let id = refused[0].id.clone();
    first.signal("KILL");
    // Its data directory is free once it is gone.
    first.exit_code().await;
    receiver.configure("/n", &created.secret, &[]).await;
    let second = ServeProcess::start_with(&flags).await;
    let received = receiver
        .wait_for("the delivery after the restart", |r| {
            r.id == id && r.answered == "ok"
        })
        .await;
    assert!(received.iter().all(|r| r.verified), "{received:?}");
    let admin = second.client().await;
    eventually("the delivery delivered", || async {
        let mut admin = admin.clone();
        deliveries(&mut admin, &created.id)
            .await
            .into_iter()
            .find(|d| d.id == id && d.status() == DeliveryStatus::Delivered)
    })
    .await;
    // The restored ask's reminders go on: the schedule was in the store.
    let mut events = second
        .client()
        .await
        .subscribe_session("s")
        .await
        .expect("subscribe");
    let reminded = within("a reminder after the restart", async {
        loop {
            if let Event::Reminder { reminder, .. } = next_event(&mut events).await {
                return reminder.count;
            }
        }
    })
    .await;
    assert!(reminded >= 1, "{reminded}");
}

/// Tenant A's 20 endpoints on a tarpit (it accepts and never answers) with a backlog
/// of deliveries; tenant B's delivery is not held behind them: a tenant may use only a
/// share of a node's delivery slots. The test prints how long B's delivery took and
/// how many of A's were still waiting then.
async fn one_tenants_slow_endpoints_do_not_starve_another() {
    let dir = TempDir::new();
    let config = ServerConfig {
        auth: AuthConfig::Jwt {
            key: KeySource::SecretFile(dir.file("secret", SECRET)),
            issuer: None,
            audience: None,
            groups_claim: DEFAULT_GROUPS_CLAIM.into(),
        },
        webhooks: WebhookConfig {
            // No retry before the test is over: every attempt of A's counts once.
            retry_initial: Duration::from_secs(600),
            retry_max: Duration::from_secs(600),
            ..webhook_config()
        },
        ..test_config()
    };
    let server = TestServer::start_with(config).await;
    let tarpit = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let tarpit_addr = tarpit.local_addr().expect("addr");
    let _tarpit = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = tarpit.accept().await {
            held.push(stream);
        }
    });
    let as_ = |token: String| {
        let server = &server;
        async move { server.client().await.with_token(&token).expect("token") }
    };
    let mut admin_a = as_(token("a", &["admin"], None)).await;
    let mut slow = Vec::new();
    for i in 0..20 {
        let url = format!("http://{tarpit_addr}/slow/{i}");
        let created = admin_a
            .create_endpoint(endpoint(url, &["ask.requested"]))
            .await
            .expect("an endpoint of A");
        slow.push(created.id);
    }
    let agent_a = as_(token("a", &["agent"], None)).await;
    let mut asking = Vec::new();
    for i in 0..10 {
        asking.push(ask_in_background(
            agent_a.clone(),
            one_question(&format!("a{i}")),
        ));
    }
    eventually("A's deliveries in flight", || {
        let mut admin = admin_a.clone();
        let id = slow[0].clone();
        async move {
            deliveries(&mut admin, &id)
                .await
                .iter()
                .any(|d| d.attempts > 0)
                .then_some(())
        }
    })
    .await;

    let receiver = Receiver::start().await;
    let mut admin_b = as_(token("b", &["admin"], None)).await;
    let fast = admin_b
        .create_endpoint(endpoint(receiver.url("/b"), &["ask.requested"]))
        .await
        .expect("an endpoint of B");
    receiver.configure("/b", &fast.secret, &[]).await;
    let started = std::time::Instant::now();
    let _asking_b = ask_in_background(as_(token("b", &["agent"], None)).await, one_question("b"));
    receiver.wait_for("B's delivery", |r| r.verified).await;
    let took = started.elapsed();
    let mut waiting = 0;
    for id in &slow {
        waiting += deliveries(&mut admin_a, id)
            .await
            .iter()
            .filter(|d| d.attempts == 0)
            .count();
    }
    println!(
        "B's delivery took {took:?} while {waiting} of A's 200 deliveries to a tarpit had \
         not been attempted yet"
    );
    assert!(
        waiting > 0,
        "B's delivery waited for all of A's to be attempted"
    );
    receiver.stop().await;
}
on_every_backend!(
    #[tokio::test]
    one_tenants_slow_endpoints_do_not_starve_another
);

/// docs/webhooks.md: a node killed between committing events and queueing their
/// deliveries loses none of them. The human's answers go through the node that dies the
/// moment the last one is acknowledged, with its intake still busy; the events wait in
/// their sessions' outboxes and the survivor queues them once a lease has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_redis_a_node_killed_between_commit_and_queueing_loses_no_delivery() {
    let redis = RedisServer::start().await;
    killed_between_commit_and_queueing(&redis.url, false).await;
}

/// The same on a Redis Cluster, whose outbox index is one per slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_redis_cluster_a_node_killed_between_commit_and_queueing_loses_no_delivery() {
    let cluster = askgate_testing::RedisCluster::start(3).await;
    killed_between_commit_and_queueing(&cluster.url, true).await;
}

async fn killed_between_commit_and_queueing(url: &str, cluster: bool) {
    const ASKS: usize = 300;
    const SESSIONS: usize = 10;
    let receiver = Receiver::start().await;
    let flags = ["--webhook-allow-private", "--redis-lease", "2s"];
    let mut nodes = ServeProcess::redis_nodes(url, cluster, 2, &flags).await;
    let doomed = nodes.pop().expect("two nodes");
    let survivor = nodes.pop().expect("two nodes");
    let mut admin = survivor.client().await;
    let created = admin
        .create_endpoint(endpoint(receiver.url("/c"), &["ask.resolved"]))
        .await
        .expect("create");
    receiver.configure("/c", &created.secret, &[]).await;
    let asking = survivor.client().await;
    let _asks: Vec<_> = (0..ASKS)
        .map(|i| {
            let ask = one_question(&format!("c-{}", i % SESSIONS)).hold_unattended();
            ask_in_background(asking.clone(), ask)
        })
        .collect();
    let human = doomed.client().await;
    let pending = eventually("every ask pending", || async {
        let mut all = Vec::new();
        for s in 0..SESSIONS {
            let mut human = human.clone();
            all.extend(human.list_pending(&format!("c-{s}")).await.ok()?);
        }
        (all.len() == ASKS).then_some(all)
    })
    .await;
    let mut answering = tokio::task::JoinSet::new();
    for requested in pending {
        let mut human = human.clone();
        answering.spawn(async move {
            let answers = vec![answer::select("q", ["yes"])];
            human
                .answer(&requested.session_id, &requested.rpc_id, answers)
                .await
                .map(|_| requested.rpc_id)
        });
    }
    let mut acknowledged = std::collections::HashSet::new();
    while let Some(answered) = answering.join_next().await {
        if let Ok(rpc_id) = answered.expect("an answer") {
            acknowledged.insert(rpc_id);
        }
    }
    doomed.signal("KILL");
    assert_eq!(acknowledged.len(), ASKS, "every answer was acknowledged");
    let received = eventually("a delivery of every acknowledged answer", || async {
        let received = receiver.received().await;
        let delivered: std::collections::HashSet<&str> = received
            .iter()
            .filter(|r| r.verified && r.event_type() == "ask.resolved")
            .map(Received::rpc_id)
            .collect();
        acknowledged
            .iter()
            .all(|id| delivered.contains(id.as_str()))
            .then_some(received.len())
    })
    .await;
    eprintln!(
        "{} answers acknowledged by the killed node, every one delivered ({} deliveries)",
        acknowledged.len(),
        received
    );
}
