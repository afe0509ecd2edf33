//! Approvers per ask (docs/approvals.md "Who may answer"): only a person an ask's
//! approvers name, by subject or by a group of their credential, may answer it, on
//! gRPC and gRPC-Web alike; anyone else gets NOT_AN_APPROVER and changes nothing. A
//! quorum counts persons, whatever channel each answer takes. (The chat channels'
//! side is the channel conformance suite's: tests/integration/conformance.rs.)

use std::time::{SystemTime, UNIX_EPOCH};

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::{AnswerRequest, Delegate, Identity, Person, QuestionAnswer};
use askgate_server::{
    ServerConfig,
    auth::jwt::{Audience, Claims, DEFAULT_GROUPS_CLAIM, KeySource},
    server::ApprovalConfig,
    server::AuthConfig,
};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use tonic::Code;

use crate::approvals::{KEY_A, deploy, jwks};
use crate::support::{
    TempDir, TestServer, WebClient, next_event, subscribed, test_config, web_client, within,
};

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

/// A token of tenant `acme` for `sub` with `roles`, naming `groups`.
fn token(sub: &str, roles: &[&str], groups: &[&str]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let claims = Claims {
        sub: sub.into(),
        tenant: "acme".into(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        sessions: None,
        exp: now + 600,
        nbf: Some(now - 5),
        iss: None,
        aud: Some(Audience::One("askgate".into())),
    };
    let mut claims = serde_json::to_value(claims).expect("claims");
    claims[DEFAULT_GROUPS_CLAIM] = serde_json::json!(groups);
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    encode(&Header::new(Algorithm::HS256), &claims, &key).expect("sign")
}

/// A server taking [`token`]s, on the engine under test.
struct Rig {
    server: TestServer,
    _dir: TempDir,
}

impl Rig {
    async fn start() -> Self {
        let dir = TempDir::new();
        let config = ServerConfig {
            auth: AuthConfig::Jwt {
                key: KeySource::SecretFile(dir.file("secret", SECRET)),
                issuer: None,
                audience: Some("askgate".into()),
                groups_claim: DEFAULT_GROUPS_CLAIM.into(),
            },
            approvals: ApprovalConfig {
                receipt_key_files: vec![dir.file("receipt.pem", KEY_A)],
                ..test_config().approvals
            },
            ..test_config()
        };
        let server = TestServer::start_with(config).await;
        Self { server, _dir: dir }
    }

    /// An admin of the tenant.
    async fn admin(&self) -> Client {
        let token = token("root", &["admin"], &[]);
        self.server
            .client()
            .await
            .with_token(&token)
            .expect("a token")
    }

    /// The asking agent (`bot`, who may follow the session too), following `s`.
    async fn bot(&self) -> (Client, askgate_client::Events) {
        let mut bot = self
            .server
            .client()
            .await
            .with_token(&token("bot", &["agent", "ui"], &[]))
            .expect("a token");
        let events = subscribed(&mut bot, "s").await;
        (bot, events)
    }

    /// A gRPC client of `sub`, a person with the `ui` role in `groups`.
    async fn person(&self, sub: &str, groups: &[&str]) -> Client {
        let token = token(sub, &["ui"], groups);
        self.server
            .client()
            .await
            .with_token(&token)
            .expect("a token")
    }
}

/// `request` with `sub`'s token (a person in `groups`), as the console sends it.
fn signed_in<T>(request: T, sub: &str, groups: &[&str]) -> tonic::Request<T> {
    let mut request = tonic::Request::new(request);
    let bearer = format!("Bearer {}", token(sub, &["ui"], groups));
    request
        .metadata_mut()
        .insert("authorization", bearer.parse().expect("ascii"));
    request
}

fn yes() -> Vec<QuestionAnswer> {
    vec![answer::select("go", ["yes"])]
}

fn go(session: &str) -> Ask {
    Ask::new(session).question(question("go", "Go?").choice("yes").choice("no"))
}

/// The `requested` event of the next ask in `events`.
async fn requested(events: &mut askgate_client::Events) -> askgate_proto::v1::Requested {
    loop {
        if let Event::Requested { requested, .. } = next_event(events).await {
            return requested;
        }
    }
}

/// A console's Answer through gRPC-Web as `sub` (in `groups`).
async fn web_answer(
    web: &mut WebClient,
    rpc_id: &str,
    sub: &str,
    groups: &[&str],
) -> Result<(), tonic::Status> {
    let request = AnswerRequest {
        session_id: "s".into(),
        rpc_id: rpc_id.into(),
        answers: yes(),
        grant: None,
    };
    web.answer(signed_in(request, sub, groups)).await.map(drop)
}

/// The ErrorInfo reason of a gRPC-Web status.
fn reason(status: &tonic::Status) -> String {
    use tonic_types::StatusExt as _;
    status
        .get_error_details()
        .error_info()
        .map(|info| info.reason.clone())
        .unwrap_or_default()
}

async fn only_approvers_answer_on_grpc_and_grpc_web() {
    let rig = Rig::start().await;
    let (mut bot, mut events) = rig.bot().await;
    let mut web = web_client(&rig.server);

    // Dee, or a member of ops; they alone may cancel too.
    let ask = go("s")
        .approvers(["Dee"])
        .approver_groups(["ops"])
        .approvers_cancel_too();
    let mut agent = bot.clone();
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let asked = requested(&mut events).await;
    let approvers = asked.approvers.as_deref().expect("approvers travel");
    assert_eq!(
        (approvers.subjects.as_slice(), approvers.groups.as_slice()),
        (["Dee".to_owned()].as_slice(), ["ops".to_owned()].as_slice())
    );
    let rpc = asked.rpc_id.clone();

    let mut bo = rig.person("bo", &["dev"]).await;
    let refused = bo
        .answer("s", &rpc, yes())
        .await
        .expect_err("bo is no approver");
    assert_eq!(
        (refused.code(), refused.reason()),
        (Code::PermissionDenied, Reason::NotAnApprover)
    );
    assert_eq!(
        refused.metadata("approvers"),
        Some("Dee or a member of ops")
    );
    assert!(
        refused
            .message()
            .contains("only Dee or a member of ops may answer this"),
        "{refused:?}"
    );
    let refused = bo
        .cancel("s", &rpc, "no")
        .await
        .expect_err("nor may cancel");
    assert_eq!(refused.reason(), Reason::NotAnApprover);
    let refused = web_answer(&mut web, &rpc, "bo", &["dev"])
        .await
        .expect_err("bo is no approver in the console either");
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::PermissionDenied, "NOT_AN_APPROVER")
    );
    // Nothing changed: still pending, and the agent still waits.
    let pending = bot.list_pending("s").await.expect("pending");
    assert_eq!(pending.len(), 1);
    assert!(!call.is_finished());

    // A member of ops, in the console.
    web_answer(&mut web, &rpc, "ana", &["ops"])
        .await
        .expect("ana is in ops");
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.resolved_by, "ana");

    // Dee by subject, however spelled, cancels.
    let mut agent = bot.clone();
    let call = tokio::spawn(async move {
        agent
            .ask(go("s").approvers(["Dee"]).approvers_cancel_too())
            .await
    });
    let rpc = requested(&mut events).await.rpc_id;
    let mut dee = rig.person("dee", &[]).await;
    dee.cancel("s", &rpc, "not now")
        .await
        .expect("dee may cancel");
    let cancelled = within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(cancelled.reason(), Reason::AskCancelled);
}
on_every_backend!(
    #[tokio::test]
    only_approvers_answer_on_grpc_and_grpc_web
);

/// Approvers that cannot be met, or name nobody, are refused up front; a retry must
/// name the same approvers as the ask its request_id names.
#[tokio::test]
async fn approvers_are_checked_and_are_part_of_the_ask() {
    let rig = Rig::start().await;
    let (mut bot, mut events) = rig.bot().await;
    let refused = |ask: Ask| {
        let mut bot = bot.clone();
        async move {
            let error = bot.ask(ask.no_retry()).await.expect_err("refused");
            assert_eq!(error.reason(), Reason::BadRequest, "{error:?}");
            error
                .violations()
                .iter()
                .map(|(field, _)| field.clone())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        refused(go("s").approvers(["ana", "Ana"]).quorum(2)).await,
        ["quorum.count"]
    );
    let nobody = go("s")
        .approvers(Vec::<String>::new())
        .approvers_cancel_too();
    assert_eq!(refused(nobody).await, ["approvers.cancel_too"]);
    assert_eq!(
        refused(go("s").approvers(["askgate:default", ""])).await,
        ["approvers.subjects[0]", "approvers.subjects[1]"]
    );
    let steps = go("s")
        .escalate(std::time::Duration::ZERO, ["bo"], false, ["sl_1"])
        .escalate(
            std::time::Duration::from_secs(1),
            Vec::<String>::new(),
            true,
            ["no such id!"],
        );
    assert_eq!(
        refused(steps).await,
        [
            "escalation[0].after_ms",
            "escalation[1].replace",
            "escalation[1].notify_channels[0]"
        ]
    );
    let many: Vec<String> = (0..33).map(|i| format!("p{i}")).collect();
    assert_eq!(
        refused(go("s").approver_groups(many)).await,
        ["approvers.groups"]
    );

    let mut agent = bot.clone();
    let first = tokio::spawn(async move {
        agent
            .ask(go("s").request_id("r-1").approvers(["ana"]))
            .await
    });
    let rpc = requested(&mut events).await.rpc_id;
    let reused = bot
        .ask(go("s").request_id("r-1").approvers(["bo"]).no_retry())
        .await
        .expect_err("other approvers");
    assert_eq!(reused.reason(), Reason::RequestIdReused);
    let mut ana = rig.person("ana", &[]).await;
    ana.answer("s", &rpc, yes()).await.expect("ana answers");
    within("the ask", first)
        .await
        .expect("join")
        .expect("answered");
}

/// A person as `PutPerson` takes them: `identities` as `KIND:VALUE`.
fn person(id: &str, groups: &[&str], identities: &[&str]) -> Person {
    Person {
        id: id.into(),
        display_name: id.to_uppercase(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        identities: identities
            .iter()
            .map(|i| {
                let (kind, value) = i.split_once(':').expect("KIND:VALUE");
                Identity {
                    kind: kind.into(),
                    value: value.into(),
                }
            })
            .collect(),
        delegate: None,
    }
}

/// People count as one whatever identity they answer with: ana's two credentials (one
/// in the console) are one vote of a quorum of 2, and the asker's person may not
/// approve its own ask through another identity. Groups come from the person.
async fn a_quorum_counts_people_not_credentials() {
    let rig = Rig::start().await;
    let mut admin = rig.admin().await;
    admin
        .put_person(person(
            "ana",
            &["ops"],
            &["subject:ana", "subject:ana-laptop", "subject:ana-bot"],
        ))
        .await
        .expect("ana");
    admin
        .put_person(person("bo", &["ops"], &["subject:bo"]))
        .await
        .expect("bo");
    let (bot, mut events) = rig.bot().await;
    let mut web = web_client(&rig.server);
    let mut agent = bot.clone();
    let call =
        tokio::spawn(async move { agent.ask(go("s").approver_groups(["ops"]).quorum(2)).await });
    let rpc = requested(&mut events).await.rpc_id;
    let mut ana = rig.person("ana", &[]).await;
    ana.answer("s", &rpc, yes())
        .await
        .expect("ana, by her person's group");
    let again = web_answer(&mut web, &rpc, "ana-laptop", &[])
        .await
        .expect_err("ana's other credential");
    assert_eq!(reason(&again), "ALREADY_APPROVED");
    let mut stranger = rig.person("cy", &[]).await;
    let refused = stranger.answer("s", &rpc, yes()).await.expect_err("cy");
    assert_eq!(refused.reason(), Reason::NotAnApprover);
    assert!(!call.is_finished(), "one person is no quorum of two");
    web_answer(&mut web, &rpc, "bo", &[]).await.expect("bo");
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.approvers, ["ana", "bo"]);

    // Asked by ana's bot: ana may not approve it, under any identity.
    let mut ana_bot = rig
        .server
        .client()
        .await
        .with_token(&token("ana-bot", &["agent", "ui"], &[]))
        .expect("a token");
    let call = tokio::spawn(async move {
        ana_bot
            .ask(go("s").approver_groups(["ops"]).quorum(2))
            .await
    });
    let rpc = requested(&mut events).await.rpc_id;
    let refused = web_answer(&mut web, &rpc, "ana-laptop", &[])
        .await
        .expect_err("her own ask");
    assert_eq!(reason(&refused), "SELF_APPROVAL");
    call.abort();
}
on_every_backend!(
    #[tokio::test]
    a_quorum_counts_people_not_credentials
);

/// While ana is away, bo answers her asks, and the receipt names both; once the
/// delegation is over, he cannot.
async fn a_delegate_answers_while_the_delegation_holds() {
    let rig = Rig::start().await;
    let mut admin = rig.admin().await;
    let away = |until: SystemTime| Person {
        delegate: Some(Delegate {
            to_person: "bo".into(),
            until: Some(until.into()),
        }),
        ..person("ana", &[], &["subject:ana"])
    };
    let hour = std::time::Duration::from_secs(3600);
    admin
        .put_person(away(SystemTime::now() + hour))
        .await
        .expect("ana, away");
    admin
        .put_person(person("bo", &[], &["subject:bo"]))
        .await
        .expect("bo");
    let (bot, mut events) = rig.bot().await;
    let ship = || {
        go("s")
            .approvers(["ana"])
            .action(&deploy().name, &deploy().arguments_json)
    };
    let mut agent = bot.clone();
    let ask = ship();
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let rpc = requested(&mut events).await.rpc_id;
    let mut bo = rig.person("bo", &[]).await;
    bo.answer("s", &rpc, yes())
        .await
        .expect("bo stands in for ana");
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.resolved_by, "bo");
    let keys = jwks(&rig.server).await;
    let claims =
        askgate_client::receipt::verify_receipt(&answered.receipt, &keys, "acme", &deploy())
            .expect("a valid receipt");
    assert_eq!(
        (claims.approvers.as_slice(), claims.on_behalf_of.as_str()),
        (["bo".to_owned()].as_slice(), "ana")
    );

    // Back: the delegation ended.
    admin
        .put_person(away(SystemTime::now() - hour))
        .await
        .expect("ana, back");
    let mut agent = bot.clone();
    let ask = ship();
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let rpc = requested(&mut events).await.rpc_id;
    let refused = bo.answer("s", &rpc, yes()).await.expect_err("not any more");
    assert_eq!(refused.reason(), Reason::NotAnApprover);
    let mut ana = rig.person("ana", &[]).await;
    ana.answer("s", &rpc, yes()).await.expect("ana herself");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
}
on_every_backend!(
    #[tokio::test]
    a_delegate_answers_while_the_delegation_holds
);

/// `People` is the admin's: an identity belongs to one person, a person is listed and
/// deleted, and every change is in the audit log.
#[tokio::test]
async fn people_are_the_admins_and_audited() {
    let rig = Rig::start().await;
    let mut admin = rig.admin().await;
    let ana = admin
        .put_person(person(
            "ana",
            &["ops"],
            &["subject:Ana", "slack:T1:U1", "email:Ana+x@Example.org"],
        ))
        .await
        .expect("ana");
    let shown: Vec<(String, String)> = ana
        .identities
        .iter()
        .map(|i| (i.kind.clone(), i.value.clone()))
        .collect();
    assert_eq!(
        shown,
        [
            ("subject".to_owned(), "ana".to_owned()),
            ("slack".to_owned(), "t1/u1".to_owned()),
            ("email".to_owned(), "ana@example.org".to_owned()),
        ]
    );
    let taken = admin
        .put_person(person("bo", &[], &["slack:t1/u1"]))
        .await
        .expect_err("ana's");
    assert_eq!(taken.reason(), Reason::BadRequest);
    assert_eq!(taken.violations()[0].0, "identities[0]");
    let mut ui = rig.person("ui", &[]).await;
    let denied = ui.list_people().await.expect_err("not an admin");
    assert_eq!(denied.reason(), Reason::PermissionDenied);
    assert_eq!(admin.list_people().await.expect("list").len(), 1);
    admin.delete_person("ana").await.expect("delete");
    let gone = admin.delete_person("ana").await.expect_err("gone");
    assert_eq!(gone.reason(), Reason::NotFound);
    let records = crate::audit::export(&mut admin).await;
    let kinds: Vec<String> = records
        .iter()
        .map(|r| {
            let body: serde_json::Value = serde_json::from_str(&r.body_json).expect("json");
            body["kind"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(kinds, ["admin.person.put", "admin.person.deleted"]);
}

/// An escalation step with `replace`: once it comes (subscribers see `escalated` with
/// its number), its approvers alone may answer; the audit log records the step.
async fn an_escalation_step_replaces_the_approvers() {
    let rig = Rig::start().await;
    let (bot, mut events) = rig.bot().await;
    let mut agent = bot.clone();
    let call = tokio::spawn(async move {
        agent
            .ask(go("s").approvers(["ana"]).escalate(
                std::time::Duration::from_millis(100),
                ["bo", "group:sre"],
                true,
                Vec::<String>::new(),
            ))
            .await
    });
    let asked = requested(&mut events).await;
    assert_eq!(asked.escalation.len(), 1);
    let step = loop {
        if let Event::Escalated { escalated, .. } = next_event(&mut events).await {
            break escalated;
        }
    };
    assert_eq!(
        (step.rpc_id.as_str(), step.step),
        (asked.rpc_id.as_str(), 1)
    );
    let mut ana = rig.person("ana", &[]).await;
    let refused = ana
        .answer("s", &asked.rpc_id, yes())
        .await
        .expect_err("replaced");
    assert_eq!(refused.reason(), Reason::NotAnApprover);
    assert_eq!(refused.metadata("approvers"), Some("bo or a member of sre"));
    let mut sre = rig.person("cy", &["sre"]).await;
    sre.answer("s", &asked.rpc_id, yes())
        .await
        .expect("a member of sre");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let mut admin = rig.admin().await;
    let records = crate::audit::export(&mut admin).await;
    let step: serde_json::Value = records
        .iter()
        .map(|r| serde_json::from_str::<serde_json::Value>(&r.body_json).expect("json"))
        .find(|b| b["kind"] == "ask.escalated")
        .expect("the step's record");
    assert_eq!(step["step"], 1);
    assert_eq!(step["replace"], true);
    assert_eq!(step["approvers"]["subjects"], serde_json::json!(["bo"]));
}
on_every_backend!(
    #[tokio::test]
    an_escalation_step_replaces_the_approvers
);
