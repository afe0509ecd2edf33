//! The shared scenarios (tests/scenarios/scenarios.json), run by the Rust client
//! against a real `askgate serve`: the same list the Python and TypeScript SDKs run
//! (client/python/tests/test_scenarios.py, client/node/test/scenarios.test.mjs).

use std::{collections::HashMap, net::SocketAddr};

use askgate_client::{AgentLease, Ask, Client, Error, Event, Following, Reason, answer, question};
use askgate_proto::v1::{AskResponse, QuestionAnswer, Resolution, SubscribeRequest};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;

use crate::support::{Balancer, ServeProcess, TempDir, askgate, eventually, finish, within};

const SCENARIOS: &str = include_str!("../scenarios/scenarios.json");

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` of {value}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|s| s.as_str().expect("a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn question_of(q: &Value) -> askgate_proto::v1::Question {
    let mut built = question(str_of(q, "id"), str_of(q, "question"));
    if let Some(header) = q["header"].as_str() {
        built = built.header(header);
    }
    if let Some(detail) = q["detail"].as_str() {
        built = built.detail(detail);
    }
    for label in strings(&q["options"]) {
        built = built.choice(&label);
    }
    if q["multi_select"].as_bool() == Some(true) {
        built = built.multi_select();
    }
    if let Some(approve) = q["plan_review"].as_str() {
        built = built.plan_review(approve);
    }
    built.build()
}

fn answer_of(a: &Value) -> QuestionAnswer {
    let id = str_of(a, "id");
    match a["custom"].as_str() {
        Some(text) => QuestionAnswer {
            selected: strings(&a["selected"]),
            ..answer::custom(id, text)
        },
        None if strings(&a["selected"]).is_empty() => answer::skip(id),
        None => answer::select(id, strings(&a["selected"])),
    }
}

/// The answers as the scenario file writes them.
fn answers_json(response: &AskResponse) -> Value {
    Value::Array(
        response
            .answers
            .iter()
            .map(|a| match &a.custom {
                Some(custom) => json!({"id": a.id, "selected": a.selected, "custom": custom}),
                None => json!({"id": a.id, "selected": a.selected}),
            })
            .collect(),
    )
}

fn expected_answers(answers: &Value) -> Value {
    Value::Array(
        answers
            .as_array()
            .expect("answers")
            .iter()
            .map(|a| {
                let mut a = a.clone();
                a.as_object_mut()
                    .expect("an answer")
                    .entry("selected")
                    .or_insert(json!([]));
                a
            })
            .collect(),
    )
}

/// Checks that `error` is the one `expected` describes.
fn expect_error(codes: &Value, error: Option<&Error>, expected: &Value, what: &str) {
    let reason = str_of(expected, "reason");
    let Some(error) = error else {
        panic!("{what}: expected {reason}, but it succeeded");
    };
    assert_eq!(error.reason().as_str_name(), reason, "{what}: {error}");
    assert_eq!(
        Some(i64::from(i32::from(error.code()))),
        codes[str_of(expected, "code")].as_i64(),
        "{what}: the code of {error}"
    );
    if let Some(metadata) = expected["metadata"].as_object() {
        for (key, value) in metadata {
            assert_eq!(
                error.metadata(key),
                value.as_str(),
                "{what}: metadata {key}"
            );
        }
    }
    if !expected["violations"].is_null() {
        let fields: Vec<&str> = error.violations().iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            strings(&expected["violations"]),
            "{what}: violations"
        );
    }
}

struct PendingAsk {
    session: String,
    request_id: String,
    key: Option<String>,
    rpc_id: Option<String>,
    call: Option<JoinHandle<Result<AskResponse, Error>>>,
}

struct Run<'a> {
    codes: &'a Value,
    server: &'a ServeProcess,
    proxy: &'a Balancer,
    tokens: HashMap<String, String>,
    asks: HashMap<String, PendingAsk>,
    follows: HashMap<String, Following>,
    leases: HashMap<String, (String, AgentLease)>,
}

impl Run<'_> {
    fn upstream(&self) -> SocketAddr {
        self.server.addr()
    }

    fn client(&self, key: Option<&str>, via: Option<&str>) -> Client {
        let url = if via == Some("proxy") {
            self.proxy.url()
        } else {
            self.server.url.clone()
        };
        let client = Client::connect_lazy(url).expect("a client");
        match key {
            Some(key) => client.with_token(&self.tokens[key]).expect("a token"),
            None => client,
        }
    }

    /// Expects `result` to be what `step` says: success, or its `error`.
    fn expect(&self, step: &Value, what: &str, result: Result<(), Error>) {
        if step["error"].is_null() {
            if let Err(error) = result {
                panic!("{what}: {error}");
            }
        } else {
            expect_error(self.codes, result.err().as_ref(), &step["error"], what);
        }
    }

    async fn step(&mut self, step: &Value) {
        let key = step["key"].as_str();
        match str_of(step, "do") {
            "ask" => {
                let session = str_of(step, "session");
                let request_id = step["request_id"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let mut ask = Ask::new(session).request_id(&request_id);
                for q in step["questions"].as_array().expect("questions") {
                    ask = ask.question(question_of(q));
                }
                if step["hold"].as_bool() == Some(true) {
                    ask = ask.hold_unattended();
                }
                if let Some(ms) = step["timeout_ms"].as_u64() {
                    ask = ask.timeout(std::time::Duration::from_millis(ms));
                }
                if step["notify"].is_object() {
                    let ms = |field: &str| step["notify"][field].as_u64().unwrap_or(0) as u32;
                    ask.request_mut().notify = Some(askgate_proto::v1::NotifyPolicy {
                        remind_after_ms: ms("remind_after_ms"),
                        remind_every_ms: ms("remind_every_ms"),
                        max_reminders: ms("max_reminders"),
                        escalate_after_ms: ms("escalate_after_ms"),
                    });
                }
                if let Some(lease) = step["lease"].as_str() {
                    let (agent_id, lease) = &self.leases[lease];
                    ask = ask.agent(agent_id, lease.incarnation());
                } else if step["agent"].is_object() {
                    let agent = &step["agent"];
                    ask = ask.agent(str_of(agent, "agent_id"), str_of(agent, "incarnation"));
                }
                if let Some(channels) = step["allowed_channels"].as_array() {
                    ask = ask.allowed_channels(channels.iter().filter_map(Value::as_str));
                }
                if step["approvers"].is_object() {
                    let names = |field: &str| {
                        step["approvers"][field]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    };
                    ask = ask
                        .approvers(names("subjects"))
                        .approver_groups(names("groups"));
                }
                if let Some(answers) = step["default_answers"].as_array() {
                    ask = ask.default_answers(answers.iter().map(answer_of).collect());
                }
                if let Some(ms) = step["ttl_ms"].as_u64() {
                    ask = ask.ttl(std::time::Duration::from_millis(ms));
                }
                if let Some(count) = step["quorum"].as_u64() {
                    ask = ask.quorum(count as u32);
                }
                // An empty batch is the server's to refuse: build the request by hand.
                if step["questions"].as_array().is_some_and(Vec::is_empty) {
                    ask.request_mut().questions.clear();
                }
                let mut client = self.client(key, step["via"].as_str());
                let call = tokio::spawn(async move { client.ask(ask).await });
                self.asks.insert(
                    str_of(step, "name").to_owned(),
                    PendingAsk {
                        session: session.to_owned(),
                        request_id,
                        key: key.map(str::to_owned),
                        rpc_id: None,
                        call: Some(call),
                    },
                );
            }
            "pending" => {
                let name = str_of(step, "ask");
                let known: Vec<String> = self
                    .asks
                    .values()
                    .filter_map(|a| a.rpc_id.clone())
                    .collect();
                let ask = &self.asks[name];
                let client = self.client(ask.key.as_deref(), None);
                let session = ask.session.clone();
                let rpc_id = eventually(&format!("{name} to be pending"), || {
                    let (mut client, session, known) = (client.clone(), session.clone(), &known);
                    async move {
                        let pending = client.list_pending(&session).await.ok()?;
                        pending
                            .into_iter()
                            .map(|p| p.rpc_id)
                            .find(|id| !known.contains(id))
                    }
                })
                .await;
                self.asks.get_mut(name).expect("the ask").rpc_id = Some(rpc_id);
            }
            verb @ ("answer" | "cancel" | "abort") => {
                let name = str_of(step, "ask");
                let ask = &self.asks[name];
                let rpc_id = ask.rpc_id.clone().unwrap_or_default();
                let mut client = self.client(key, None);
                if let Some(channel) = step["channel"].as_str() {
                    client = client.with_channel(channel).expect("a channel name");
                }
                let what = format!("{verb} {name}");
                let result = match verb {
                    "answer" => {
                        let answers = step["answers"]
                            .as_array()
                            .expect("answers")
                            .iter()
                            .map(answer_of);
                        within(
                            &what,
                            client.answer(&ask.session, &rpc_id, answers.collect()),
                        )
                        .await
                    }
                    "cancel" => {
                        let reason = step["reason"].as_str().unwrap_or_default();
                        within(&what, client.cancel(&ask.session, &rpc_id, reason)).await
                    }
                    _ => within(&what, client.abort(&ask.session, &ask.request_id)).await,
                };
                self.expect(step, &what, result);
            }
            "outcome" => {
                let name = str_of(step, "ask");
                let ask = self.asks.get_mut(name).expect("the ask");
                let call = ask.call.take().expect("one outcome per ask");
                let what = format!("the outcome of {name}");
                let result = within(&what, call).await.expect("the ask's task");
                if step["error"].is_null() {
                    let response = result.unwrap_or_else(|e| panic!("ask {name} failed: {e}"));
                    assert_eq!(answers_json(&response), expected_answers(&step["answers"]));
                    assert_eq!(response.resolved_by, str_of(step, "resolved_by"));
                    let resolution = step["resolution"].as_str().unwrap_or("ANSWERED");
                    assert_eq!(response.resolution().as_str_name(), resolution);
                    if step["approvers"].is_array() {
                        assert_eq!(response.approvers, strings(&step["approvers"]));
                    }
                    if let Some(rpc_id) = &ask.rpc_id {
                        assert_eq!(&response.rpc_id, rpc_id, "the answer of the same ask");
                    }
                } else {
                    expect_error(self.codes, result.err().as_ref(), &step["error"], &what);
                }
            }
            "follow" => {
                let client = self.client(key, step["via"].as_str());
                let following = client.follow(SubscribeRequest {
                    session_id: str_of(step, "session").to_owned(),
                    after: step["after"].as_str().unwrap_or_default().to_owned(),
                    exclusive: step["exclusive"].as_bool() == Some(true),
                    ..Default::default()
                });
                self.follows
                    .insert(str_of(step, "name").to_owned(), following);
            }
            "event" => {
                let name = str_of(step, "follow");
                let following = self.follows.get_mut(name).expect("the follow");
                let what = format!("an event of {name}");
                let next = within(&what, following.next())
                    .await
                    .expect("the follow ended");
                if !step["error"].is_null() {
                    expect_error(self.codes, next.as_ref().err(), &step["error"], &what);
                    return;
                }
                let event = next.unwrap_or_else(|e| panic!("{what}: {e}"));
                let (kind, rpc_id) = match &event {
                    Event::Requested { requested, .. } => ("requested", Some(&requested.rpc_id)),
                    Event::Resolved { resolved, .. } => ("resolved", Some(&resolved.rpc_id)),
                    Event::Synced { .. } => ("synced", None),
                    Event::Reset => ("reset", None),
                    Event::Reminder { reminder, .. } => ("reminder", Some(&reminder.rpc_id)),
                    Event::Escalated { escalated, .. } => ("escalated", Some(&escalated.rpc_id)),
                    Event::Approval { approval, .. } => ("approval", Some(&approval.rpc_id)),
                    other => panic!("{what}: an event kind the scenarios do not know: {other:?}"),
                };
                assert_eq!(kind, str_of(step, "kind"), "{what}: {event:?}");
                if let Event::Synced { resumed, .. } = &event {
                    assert_eq!(Some(*resumed), step["resumed"].as_bool(), "synced.resumed");
                }
                if let Some(rpc_id) = rpc_id {
                    let ask = self.asks.get_mut(str_of(step, "ask")).expect("the ask");
                    let known = ask.rpc_id.get_or_insert_with(|| rpc_id.clone());
                    assert_eq!(rpc_id, known, "the {kind} event of its ask");
                }
                if let Event::Approval { approval, .. } = &event {
                    assert_eq!(approval.subject, str_of(step, "subject"), "{what}");
                    assert_eq!(Some(u64::from(approval.count)), step["count"].as_u64());
                    assert_eq!(Some(u64::from(approval.needed)), step["needed"].as_u64());
                }
                if let (Event::Resolved { resolved, .. }, Some(expected)) =
                    (&event, step["resolution"].as_str())
                {
                    let resolution = Resolution::try_from(resolved.reason).expect("a resolution");
                    assert_eq!(resolution.as_str_name(), expected);
                }
            }
            "cut" => {
                self.proxy.remove(self.upstream());
                self.proxy.cut();
            }
            "restore" => self.proxy.add(self.upstream()),
            "attach" => {
                let parent = step["parent"]
                    .as_str()
                    .map(|p| self.leases[p].0.clone())
                    .unwrap_or_default();
                let agent_id = str_of(step, "agent_id");
                let mut client = self.client(key, None);
                let what = format!("attach {}", str_of(step, "name"));
                match within(&what, client.attach(agent_id, &parent)).await {
                    Ok(lease) if step["error"].is_null() => {
                        self.leases.insert(
                            str_of(step, "name").to_owned(),
                            (agent_id.to_owned(), lease),
                        );
                    }
                    result => self.expect(step, &what, result.map(drop)),
                }
            }
            "detach" => {
                drop(
                    self.leases
                        .remove(str_of(step, "lease"))
                        .expect("the lease"),
                );
            }
            other => panic!("a step this runner does not know: {other}"),
        }
    }
}

/// `askgate keys add` for each key of the scenario; the keys file and the keys.
pub async fn keys_file(dir: &TempDir, keys: &Value) -> (String, HashMap<String, String>) {
    let path = dir.0.join("keys.json").display().to_string();
    let mut tokens = HashMap::new();
    for (name, key) in keys.as_object().expect("keys") {
        let roles = strings(&key["roles"]).join(",");
        let sessions = strings(&key["sessions"]).join(",");
        let mut args = vec![
            "keys",
            "add",
            "--file",
            &path,
            "--tenant",
            str_of(key, "tenant"),
        ];
        args.extend(["--sub", str_of(key, "sub"), "--roles", &roles]);
        if !sessions.is_empty() {
            args.extend(["--sessions", &sessions]);
        }
        let (code, out, err) = finish(askgate(&args)).await;
        assert_eq!(code, 0, "askgate keys add: {err}");
        tokens.insert(name.clone(), out.trim().to_owned());
    }
    (path, tokens)
}

async fn run(codes: &Value, scenario: &Value) {
    run_on(codes, scenario, &[]).await;
}

/// Runs `scenario` against a server started with `engine`'s flags besides its own.
async fn run_on(codes: &Value, scenario: &Value, engine: &[String]) {
    let dir = TempDir::new();
    let mut args: Vec<String> = strings(&scenario["server"]["args"]);
    args.extend(engine.iter().cloned());
    let mut tokens = HashMap::new();
    if scenario["server"]["keys"].is_object() {
        let (path, made) = keys_file(&dir, &scenario["server"]["keys"]).await;
        args.extend(["--auth".into(), "keys".into(), "--keys-file".into(), path]);
        tokens = made;
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = ServeProcess::start_with(&args).await;
    let upstream = server.addr();
    let proxy = Balancer::start(vec![upstream]).await;
    let mut run = Run {
        codes,
        server: &server,
        proxy: &proxy,
        tokens,
        asks: HashMap::new(),
        follows: HashMap::new(),
        leases: HashMap::new(),
    };
    for step in scenario["steps"].as_array().expect("steps") {
        run.step(step).await;
    }
    for ask in run.asks.values_mut() {
        if let Some(call) = ask.call.take() {
            call.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_scenarios_pass() {
    let file: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json");
    for scenario in file["scenarios"].as_array().expect("scenarios") {
        let name = str_of(scenario, "name");
        let outcome = tokio::spawn({
            let (codes, scenario) = (file["codes"].clone(), scenario.clone());
            async move { run(&codes, &scenario).await }
        })
        .await;
        if let Err(failure) = outcome {
            let why = failure
                .try_into_panic()
                .ok()
                .and_then(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                })
                .unwrap_or_default();
            panic!("scenario {name}: {why}");
        }
    }
}

/// The scenarios of approvals (a quorum, default answers, allowed channels, approvers) on the
/// durable engines too: SQLite, one Redis and a Redis Cluster (the SDKs run every
/// scenario on memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_scenarios_pass_on_every_engine() {
    let file: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json");
    let terms = ["quorum", "allowed_channels", "approvers", "default_answers"];
    let approvals: Vec<&Value> = file["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .filter(|s| {
            s["steps"].as_array().is_some_and(|steps| {
                steps
                    .iter()
                    .any(|step| terms.iter().any(|t| !step[t].is_null()))
            })
        })
        .collect();
    assert!(approvals.len() >= 4, "the approval scenarios are found");
    let redis = askgate_testing::RedisServer::start().await;
    let cluster = askgate_testing::RedisCluster::start(3).await;
    let data = TempDir::new();
    for scenario in approvals {
        let name = str_of(scenario, "name");
        let engines: [Vec<String>; 3] = [
            vec![
                "--backend".into(),
                "sqlite".into(),
                "--data-dir".into(),
                data.0.join(name).display().to_string(),
            ],
            vec![
                "--backend".into(),
                "redis".into(),
                "--redis-url".into(),
                redis.url.clone(),
            ],
            vec![
                "--backend".into(),
                "redis".into(),
                "--redis-cluster".into(),
                "--redis-url".into(),
                cluster.url.clone(),
            ],
        ];
        for engine in engines {
            // The scenarios reuse their session names: each run starts on an empty store.
            flush(&redis.url, &cluster.url).await;
            let outcome = tokio::spawn({
                let (codes, scenario, engine) =
                    (file["codes"].clone(), scenario.clone(), engine.clone());
                async move { run_on(&codes, &scenario, &engine).await }
            })
            .await;
            if let Err(failure) = outcome {
                let why = failure
                    .try_into_panic()
                    .ok()
                    .and_then(|p| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                panic!("scenario {name} on {}: {why}", engine[1]);
            }
        }
    }
}

/// Empties the test's Redis and every shard of its cluster.
async fn flush(redis: &str, cluster: &str) {
    for url in std::iter::once(redis).chain(cluster.split(',')) {
        let client = redis::Client::open(url).expect("a redis url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to redis");
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut conn)
            .await
            .expect("flushall");
    }
}

#[test]
fn the_scenario_file_names_every_reason_the_proto_has() {
    let file: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json");
    let mut named: Vec<String> = file["not_in_scenarios"]
        .as_object()
        .expect("not_in_scenarios")
        .keys()
        .cloned()
        .collect();
    fn collect(value: &Value, named: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let (Some(reason), Some(_)) = (map.get("reason"), map.get("code")) {
                    named.extend(reason.as_str().map(str::to_owned));
                }
                map.values().for_each(|v| collect(v, named));
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, named)),
            _ => {}
        }
    }
    collect(&file["scenarios"], &mut named);
    let missing: Vec<&str> = (1..)
        .map_while(|n| Reason::try_from(n).ok())
        .map(|r| r.as_str_name())
        .filter(|r| !named.iter().any(|n| n == r))
        .collect();
    assert!(missing.is_empty(), "reasons no scenario meets: {missing:?}");
}

/// The one retry rule every SDK applies (scenarios.json's `retries`), on the errors
/// this client makes of the statuses it receives.
#[test]
fn the_client_retries_exactly_the_shared_list() {
    use tonic_types::{ErrorDetails, StatusExt};
    let file: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json");
    let cases = file["retries"]["cases"].as_array().expect("retries.cases");
    assert!(!cases.is_empty());
    for case in cases {
        let (reason, code) = (str_of(case, "reason"), str_of(case, "code"));
        let code = tonic::Code::from_i32(
            i32::try_from(file["codes"][code].as_i64().expect("a known code")).expect("a code"),
        );
        let status = match reason {
            "ERROR_REASON_UNSPECIFIED" => tonic::Status::new(code, "a transport failure"),
            reason => tonic::Status::with_error_details(
                code,
                "refused",
                ErrorDetails::with_error_info(reason, "askgate", std::collections::HashMap::new()),
            ),
        };
        let error = askgate_client::Error::from(status);
        assert_eq!(
            error.retryable(),
            case["retryable"].as_bool().expect("retryable"),
            "{case}"
        );
    }
}
