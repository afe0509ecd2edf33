//! Multi-tenant security through a real server with JWT auth: the credential matrix
//! (each RPC against each kind of credential, exact code and reason), tenant isolation
//! (another tenant's session or rpc_id is indistinguishable from a missing one, and no
//! event crosses tenants), and API keys reloaded on SIGHUP.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use askgate_client::{Ask, Client, Error, Event, Reason, answer, question};
use askgate_proto::v1::SubscribeRequest;
use askgate_server::server::MetricsConfig;
use askgate_server::{
    ServerConfig,
    auth::jwt::{Audience, Claims, DEFAULT_GROUPS_CLAIM, KeySource},
    backend::StateConfig,
    server::{AuthConfig, MetricsAuth},
};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use tonic::Code;

use crate::support::{
    TempDir, TestServer, eventually, next_event, next_requested, test_config, until_synced, within,
};

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
const ISSUER: &str = "askgate-tests";
const AUDIENCE: &str = "askgate";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn claims(tenant: &str, sub: &str, roles: &[&str], sessions: Option<&[&str]>) -> Claims {
    Claims {
        sub: sub.into(),
        tenant: tenant.into(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        sessions: sessions.map(|s| s.iter().map(|p| (*p).to_owned()).collect()),
        exp: now() + 600,
        nbf: Some(now() - 5),
        iss: Some(ISSUER.into()),
        aud: Some(Audience::One(AUDIENCE.into())),
    }
}

fn sign(claims: &Claims, secret: &str) -> String {
    let key = EncodingKey::from_secret(secret.as_bytes()).expect("key");
    encode(&Header::new(Algorithm::HS256), claims, &key).expect("sign")
}

/// A token whose header says `alg: none`, with no signature.
fn unsigned(claims: &Claims) -> String {
    use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as b64};
    let header = b64.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let body = b64.encode(serde_json::to_vec(claims).expect("json"));
    format!("{header}.{body}.")
}

struct JwtServer {
    server: TestServer,
    _dir: TempDir,
}

/// A server accepting HS256 tokens signed with SECRET for ISSUER and AUDIENCE; the
/// secret file lives in `dir`.
fn jwt_config(dir: &TempDir) -> ServerConfig {
    ServerConfig {
        auth: AuthConfig::Jwt {
            key: KeySource::SecretFile(dir.file("secret", SECRET)),
            issuer: Some(ISSUER.into()),
            audience: Some(AUDIENCE.into()),
            groups_claim: DEFAULT_GROUPS_CLAIM.into(),
        },
        ..test_config()
    }
}

async fn jwt_server() -> JwtServer {
    let dir = TempDir::new();
    let server = TestServer::start_with(jwt_config(&dir)).await;
    JwtServer { server, _dir: dir }
}

async fn client(server: &TestServer, token: Option<&str>) -> Client {
    let client = server.client().await;
    match token {
        Some(token) => client.with_token(token).expect("token"),
        None => client,
    }
}

/// What a call came back with: Ok, or (code, reason).
type Outcome = Result<(), (Code, Reason)>;

fn outcome<T>(result: Result<T, Error>) -> Outcome {
    result.map(|_| ()).map_err(|e| (e.code(), e.reason()))
}

/// Runs each RPC once with `client` against session "s" (or all sessions) and reports
/// the outcomes in a fixed order: Ask, Attach, Subscribe, SubscribeAll, Answer, Cancel,
/// ListPending. An admitted Ask holds and expires quickly; an admitted Answer or Cancel
/// names a missing rpc and gets NOT_PENDING.
async fn matrix_row(client: &mut Client) -> [Outcome; 7] {
    let ask = Ask::new("s")
        .question(question("q", "ok?"))
        .hold_unattended()
        .timeout(Duration::from_millis(50))
        .no_retry();
    let subscribe = |all: bool| SubscribeRequest {
        session_id: if all { String::new() } else { "s".into() },
        all_sessions: all,
        ..Default::default()
    };
    [
        outcome(client.ask(ask).await),
        outcome(client.attach("agent-1", "").await),
        outcome(client.subscribe(subscribe(false)).await),
        outcome(client.subscribe(subscribe(true)).await),
        outcome(client.answer("s", "missing", vec![answer::skip("q")]).await),
        outcome(client.cancel("s", "missing", "").await),
        outcome(client.list_pending("s").await),
    ]
}

const UNAUTHENTICATED: Outcome = Err((Code::Unauthenticated, Reason::Unauthenticated));
const DENIED: Outcome = Err((Code::PermissionDenied, Reason::PermissionDenied));
const EXPIRED: Outcome = Err((Code::DeadlineExceeded, Reason::AskExpired));
const NOT_PENDING: Outcome = Err((Code::NotFound, Reason::NotPending));

#[tokio::test]
async fn every_rpc_against_every_kind_of_credential() {
    let JwtServer { server, _dir } = jwt_server().await;
    let both = claims("acme", "svc", &["agent", "ui"], None);
    let mut expired = both.clone();
    expired.exp = now() - 3600;
    expired.nbf = Some(now() - 7200);
    let mut wrong_audience = both.clone();
    wrong_audience.aud = Some("someone-else".into());

    let unauthenticated = [UNAUTHENTICATED; 7];
    let rows: Vec<(&str, Option<String>, [Outcome; 7])> = vec![
        ("no credential", None, unauthenticated),
        (
            "bad signature",
            Some(sign(&both, "another-secret-of-at-least-32-bytes!")),
            unauthenticated,
        ),
        ("expired", Some(sign(&expired, SECRET)), unauthenticated),
        (
            "wrong audience",
            Some(sign(&wrong_audience, SECRET)),
            unauthenticated,
        ),
        ("alg none", Some(unsigned(&both)), unauthenticated),
        (
            "agent role",
            Some(sign(&claims("acme", "worker", &["agent"], None), SECRET)),
            [EXPIRED, Ok(()), DENIED, DENIED, DENIED, DENIED, DENIED],
        ),
        (
            "ui role",
            Some(sign(&claims("acme", "ana", &["ui"], None), SECRET)),
            [
                DENIED,
                DENIED,
                Ok(()),
                Ok(()),
                NOT_PENDING,
                NOT_PENDING,
                Ok(()),
            ],
        ),
        (
            "ui role limited to another session",
            Some(sign(
                &claims("acme", "bo", &["ui"], Some(&["other-*"])),
                SECRET,
            )),
            // all_sessions is admitted, and shows only the sessions the patterns match.
            [DENIED, DENIED, DENIED, Ok(()), DENIED, DENIED, DENIED],
        ),
        (
            "other tenant",
            Some(sign(
                &claims("globex", "eve", &["agent", "ui"], None),
                SECRET,
            )),
            [
                EXPIRED,
                Ok(()),
                Ok(()),
                Ok(()),
                NOT_PENDING,
                NOT_PENDING,
                Ok(()),
            ],
        ),
        (
            "right tenant",
            Some(sign(&both, SECRET)),
            [
                EXPIRED,
                Ok(()),
                Ok(()),
                Ok(()),
                NOT_PENDING,
                NOT_PENDING,
                Ok(()),
            ],
        ),
    ];
    for (name, token, expected) in rows {
        let mut client = client(&server, token.as_deref()).await;
        let got = within(name, matrix_row(&mut client)).await;
        assert_eq!(got, expected, "{name}");
    }
}

#[tokio::test]
async fn another_tenants_rpc_ids_and_events_are_invisible() {
    let JwtServer { server, _dir } = jwt_server().await;
    let acme = sign(&claims("acme", "ana", &["agent", "ui"], None), SECRET);
    let globex = sign(&claims("globex", "eve", &["agent", "ui"], None), SECRET);
    let mut a = client(&server, Some(&acme)).await;
    let mut b = client(&server, Some(&globex)).await;

    // Tenant B watches the same session name and all its sessions while A works.
    let mut b_session = b.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut b_session).await;
    let mut b_all = b.subscribe_all().await.expect("subscribe all");
    until_synced(&mut b_all).await;

    let mut a_events = a.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut a_events).await;
    let mut asker = a.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(Ask::new("s").question(question("q", "Deploy?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut a_events).await;

    // B sees no pending ask, and A's real rpc_id behaves exactly like a made-up one.
    assert!(b.list_pending("s").await.expect("list").is_empty());
    let made_up = "01900000-0000-7000-8000-000000000000";
    for (real, fake) in [
        (
            b.answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
                .await,
            b.answer("s", made_up, vec![answer::select("q", ["yes"])])
                .await,
        ),
        (
            b.cancel("s", &rpc_id, "").await,
            b.cancel("s", made_up, "").await,
        ),
    ] {
        let (real, fake) = (real.expect_err("real"), fake.expect_err("fake"));
        assert_eq!((real.code(), real.reason()), (fake.code(), fake.reason()));
        assert_eq!(real.message(), fake.message());
        assert_eq!(real.metadata("resolution"), fake.metadata("resolution"));
        assert_eq!(real.metadata("session_id"), fake.metadata("session_id"));
    }

    a.answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("A answers");
    let response = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(
        response.resolved_by, "ana",
        "resolved_by is the credential's sub"
    );

    // Nothing of A's reached B's streams.
    for events in [&mut b_session, &mut b_all] {
        use tokio_stream::StreamExt;
        let quiet = tokio::time::timeout(Duration::from_millis(200), events.next()).await;
        assert!(quiet.is_err(), "tenant B saw {quiet:?}");
    }
}

/// docs/protocol.md "Security": a credential limited to some sessions may follow
/// `all_sessions` and sees only the events of the sessions its patterns match; its
/// stream does not make the tenant's sessions attended (Semantics 8). WhoAmI tells each
/// caller who it is, what it may see and the groups its token names.
async fn a_session_limited_credential_follows_only_its_sessions() {
    let dir = TempDir::new();
    let config = ServerConfig {
        settings: StateConfig {
            reconnect_grace: Duration::from_millis(100),
            ..StateConfig::default()
        },
        ..jwt_config(&dir)
    };
    let server = TestServer::start_with(config).await;
    let limited = claims("acme", "bo", &["ui"], Some(&["team-a/*"]));
    let expires_at = UNIX_EPOCH + Duration::from_secs(limited.exp);
    let mut limited = client(&server, Some(&sign(&limited, SECRET))).await;
    // A token naming groups in its groups claim (`groups`, the default).
    let mut grouped =
        serde_json::to_value(claims("acme", "worker", &["agent", "ui"], None)).expect("claims");
    grouped["groups"] = serde_json::json!(["sre", "dba"]);
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    let agent = encode(&Header::new(Algorithm::HS256), &grouped, &key).expect("sign");
    let mut agent = client(&server, Some(&agent)).await;

    let me = limited.who_am_i().await.expect("whoami");
    assert_eq!(
        (me.tenant.as_str(), me.subject.as_str(), me.roles.as_slice()),
        ("acme", "bo", ["ui".to_owned()].as_slice())
    );
    assert_eq!(me.sessions, ["team-a/*"]);
    assert!(!me.every_session);
    let expiry = me.expires_at.expect("a token's expiry");
    assert_eq!(SystemTime::try_from(expiry).expect("time"), expires_at);
    assert!(me.groups.is_empty());
    let whole = agent.who_am_i().await.expect("whoami");
    assert!(whole.every_session && whole.sessions.is_empty());
    assert_eq!(whole.groups, ["sre", "dba"]);

    // A pending ask in a session it may not see is not in its snapshot.
    let hold = |session: &str, text: &str| {
        Ask::new(session)
            .question(question("q", text).choice("yes"))
            .hold_unattended()
    };
    let mut asker = agent.clone();
    let hidden = tokio::spawn(async move { asker.ask(hold("team-b/1", "hidden")).await });
    let mut all = agent.subscribe_all().await.expect("subscribe all");
    let hidden_rpc = next_requested(&mut all).await;

    let mut mine = limited.subscribe_all().await.expect("subscribe all");
    assert!(
        until_synced(&mut mine).await.is_empty(),
        "no team-a ask yet"
    );

    // Only team-a's events reach it, in order, while team-b's are filtered out.
    let mut calls = Vec::new();
    for (session, text) in [
        ("team-b/2", "other"),
        ("team-a/x", "one"),
        ("team-a/y", "two"),
    ] {
        let mut asker = agent.clone();
        let ask = hold(session, text);
        calls.push(tokio::spawn(async move { asker.ask(ask).await }));
        next_requested(&mut all).await;
    }
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let Event::Requested { requested, .. } = next_event(&mut mine).await {
            seen.push((requested.session_id, requested.rpc_id));
        }
    }
    assert_eq!(
        seen.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        ["team-a/x", "team-a/y"]
    );
    agent
        .cancel("team-b/1", &hidden_rpc, "")
        .await
        .expect("cancel the hidden ask");
    limited
        .answer(&seen[0].0, &seen[0].1, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer its own");
    match next_event(&mut mine).await {
        Event::Resolved { resolved, .. } => {
            assert_eq!(
                (resolved.session_id.as_str(), resolved.resolved_by.as_str()),
                ("team-a/x", "bo")
            );
        }
        other => panic!("expected team-a/x resolved, not team-b/1's: {other:?}"),
    }

    // Its stream follows no session for the unattended rule: with the tenant-wide
    // stream gone, a FAIL ask in team-a fails NO_PROVIDER.
    drop(all);
    let refused = eventually("the unattended ask to be refused", || {
        let mut agent = agent.clone();
        async move {
            let ask = Ask::new("team-a/z")
                .question(question("q", "anyone?").choice("yes"))
                .no_retry()
                .timeout(Duration::from_millis(200));
            match agent.ask(ask).await {
                Err(e) if e.reason() == Reason::NoProvider => Some(e),
                _ => None,
            }
        }
    })
    .await;
    assert_eq!(refused.code(), Code::FailedPrecondition);
    for call in calls.into_iter().chain([hidden]) {
        call.abort();
    }
}
on_every_backend!(
    #[tokio::test]
    a_session_limited_credential_follows_only_its_sessions
);

/// docs/protocol.md "Security": credentials are checked from the headers, before the message is
/// decoded. A request far over the size limit without a credential is refused as
/// unauthenticated (once decoded it would be BAD_REQUEST for its size).
#[tokio::test]
async fn an_unauthenticated_call_is_refused_before_its_message_is_read() {
    let JwtServer { server, _dir } = jwt_server().await;
    let mut anonymous = client(&server, None).await;
    let huge = Ask::new("s")
        .question(question("q", &"x".repeat(6 * 1024 * 1024)))
        .no_retry();
    let err = within("the refusal", anonymous.ask(huge))
        .await
        .expect_err("refused");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::Unauthenticated, Reason::Unauthenticated)
    );
    let garbage = within(
        "the refusal",
        anonymous.answer(
            "s",
            "r",
            vec![answer::custom("q", &"y".repeat(6 * 1024 * 1024))],
        ),
    )
    .await
    .expect_err("refused");
    assert_eq!(garbage.reason(), Reason::Unauthenticated);
}

/// docs/protocol.md "Security": a Subscribe or Attach stream ends with UNAUTHENTICATED when the
/// token it was opened with expires, not later.
#[tokio::test]
async fn open_streams_end_when_their_token_expires() {
    let JwtServer { server, _dir } = jwt_server().await;
    let mut short = claims("acme", "ana", &["agent", "ui"], None);
    short.exp = now() + 2;
    let expires_at = UNIX_EPOCH + Duration::from_secs(short.exp);
    let mut holder = client(&server, Some(&sign(&short, SECRET))).await;
    let mut events = holder.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut events).await;
    let mut all = holder.subscribe_all().await.expect("subscribe all");
    until_synced(&mut all).await;
    let mut lease = holder.attach("agent-1", "").await.expect("attach");

    for stream in [&mut events, &mut all] {
        use tokio_stream::StreamExt;
        let ended = within("the stream to end at expiry", stream.next()).await;
        let err = match ended {
            Some(Err(err)) => err,
            other => panic!("expected UNAUTHENTICATED, got {other:?}"),
        };
        assert_eq!(
            (err.code(), err.reason()),
            (Code::Unauthenticated, Reason::Unauthenticated)
        );
        assert!(
            SystemTime::now() >= expires_at,
            "ended before the token's exp"
        );
    }
    let err = within("the lease to end at expiry", lease.ended())
        .await
        .expect("an error, not a plain end");
    assert_eq!(err.reason(), Reason::Unauthenticated);

    // A stream of a longer-lived token on the same server is still open.
    let long = sign(&claims("acme", "bo", &["ui"], None), SECRET);
    let mut other = client(&server, Some(&long)).await;
    let mut kept = other.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut kept).await;
}

/// docs/protocol.md "Security": an agent's lease belongs to the subject that attached it. Another
/// agent credential of the tenant, even one limited to other sessions, gets
/// PERMISSION_DENIED and the holder's pending ask stays pending; an admin may take over.
async fn an_agent_lease_belongs_to_the_subject_that_attached_it() {
    let JwtServer { server, _dir } = jwt_server().await;
    let owner = sign(&claims("acme", "worker-a", &["agent", "ui"], None), SECRET);
    let intruder = sign(
        &claims("acme", "worker-b", &["agent"], Some(&["elsewhere-*"])),
        SECRET,
    );
    let admin = sign(&claims("acme", "root", &["admin"], None), SECRET);
    let mut owner = client(&server, Some(&owner)).await;
    let mut lease = owner.attach("agent-1", "").await.expect("attach");
    let mut events = owner.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut events).await;
    let mut asker = owner.clone();
    let incarnation = lease.incarnation().to_owned();
    let call = tokio::spawn(async move {
        asker
            .ask(
                Ask::new("s")
                    .question(question("q", "Deploy?").choice("yes"))
                    .agent("agent-1", &incarnation),
            )
            .await
    });
    let rpc_id = next_requested(&mut events).await;

    let mut intruder = client(&server, Some(&intruder)).await;
    let refused = intruder
        .attach("agent-1", "")
        .await
        .expect_err("another subject");
    assert_eq!(
        (refused.code(), refused.reason()),
        (Code::PermissionDenied, Reason::PermissionDenied)
    );
    let pending = owner.list_pending("s").await.expect("list");
    assert_eq!(pending.len(), 1, "the owner's ask is still pending");
    assert_eq!(pending[0].rpc_id, rpc_id);

    // The admin role may take the lease over: the owner's lease ends and its ask is
    // aborted, as on any re-attach.
    let mut admin = client(&server, Some(&admin)).await;
    let _taken = admin.attach("agent-1", "").await.expect("admin takes over");
    let outcome = within("the owner's ask", call).await.expect("join");
    assert_eq!(outcome.expect_err("aborted").reason(), Reason::AskAborted);
    within("the owner's lease to end", lease.ended()).await;
}
on_every_backend!(
    #[tokio::test]
    an_agent_lease_belongs_to_the_subject_that_attached_it
);

/// GETs `/metrics` over plain HTTP/1.1.
async fn scrape(addr: std::net::SocketAddr) -> String {
    let (head, body) = scrape_with(addr, None).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body
}

/// GETs `/metrics`, with a bearer token if given; the response's head and body.
async fn scrape_with(addr: std::net::SocketAddr, token: Option<&str>) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: askgate\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    within("the scrape", stream.read_to_string(&mut response))
        .await
        .expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_owned(), body.to_owned())
}

/// docs/protocol.md "Security": with `--metrics-token-file`, only scrapes that send the token get
/// the metrics.
#[tokio::test]
async fn the_metrics_listener_can_require_a_bearer_token() {
    let dir = TempDir::new();
    let token_file = dir.file("metrics-token", "scrape-me-please\n");
    let config = ServerConfig {
        metrics: MetricsConfig {
            auth: MetricsAuth::Bearer(token_file),
            ..test_config().metrics
        },
        ..test_config()
    };
    let server = TestServer::start_with_metrics(config).await;
    let metrics = server.metrics_addr.expect("metrics");
    for token in [None, Some("wrong"), Some("scrape-me-please-not")] {
        let (head, body) = scrape_with(metrics, token).await;
        assert!(head.starts_with("HTTP/1.1 401"), "{token:?}: {head}");
        assert!(!body.contains("askgate_"), "{token:?}: {body}");
    }
    let (head, body) = scrape_with(metrics, Some("scrape-me-please")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(parse_exposition(&body).contains_key("askgate_pending_asks"));
}

/// Checks the Prometheus / OpenMetrics text format line by line and returns the
/// samples as `series -> value`.
fn parse_exposition(text: &str) -> std::collections::HashMap<String, f64> {
    let mut samples = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            let kind = comment.split_whitespace().next().unwrap_or_default();
            assert!(
                ["HELP", "TYPE", "UNIT", "EOF"].contains(&kind),
                "bad comment: {line}"
            );
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "unclosed labels in {line}");
        }
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
        samples.insert(series.to_owned(), value);
    }
    assert!(
        text.trim_end().ends_with("# EOF"),
        "the exposition ends with # EOF"
    );
    samples
}

async fn the_metrics_endpoint_parses_and_its_counters_move() {
    let dir = TempDir::new();
    let server = TestServer::start_with_metrics(jwt_config(&dir)).await;
    let metrics = server.metrics_addr.expect("metrics");
    let before = parse_exposition(&scrape(metrics).await);
    assert_eq!(before.get("askgate_pending_asks"), Some(&0.0));

    let token = sign(&claims("acme", "ana", &["agent", "ui"], None), SECRET);
    let mut a = client(&server, Some(&token)).await;
    let mut events = a.subscribe_session("s").await.expect("subscribe");
    until_synced(&mut events).await;
    let mut asker = a.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(Ask::new("s").question(question("q", "ok?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    let during = parse_exposition(&scrape(metrics).await);
    assert_eq!(during.get("askgate_pending_asks"), Some(&1.0));
    assert_eq!(during.get("askgate_subscribers"), Some(&1.0));
    a.answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let late = a
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await;
    assert_eq!(late.expect_err("late").reason(), Reason::NotPending);
    let anonymous = client(&server, None).await.list_pending("s").await;
    assert_eq!(
        anonymous.expect_err("refused").reason(),
        Reason::Unauthenticated
    );

    let after = parse_exposition(&scrape(metrics).await);
    assert_eq!(
        after.get("askgate_asks_total{outcome=\"ANSWERED\"}"),
        Some(&1.0)
    );
    assert_eq!(after.get("askgate_answer_conflicts_total"), Some(&1.0));
    assert_eq!(
        after.get("askgate_auth_failures_total{reason=\"missing\"}"),
        Some(&1.0)
    );
    assert_eq!(after.get("askgate_human_wait_seconds_count"), Some(&1.0));
    assert_eq!(after.get("askgate_pending_asks"), Some(&0.0));
    let answers = after.get("askgate_rpc_duration_seconds_count{method=\"Answer\"}");
    assert_eq!(answers, Some(&2.0), "{after:?}");
}
on_every_backend!(
    #[tokio::test]
    the_metrics_endpoint_parses_and_its_counters_move
);
