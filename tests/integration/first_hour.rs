//! What a new user meets in the first hour with the CLI, as processes: a request_id
//! that names one ask, a server that is not running, the approval flags of `ask` and
//! the words and exit codes of what they lead to, and a second `serve`.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{ServeProcess, TempDir, askgate, finish, within};

/// The last line of a failed command's stderr: its JSON error.
fn error_of(stderr: &str) -> Value {
    let last = stderr.trim().lines().next_back().expect("a line on stderr");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"))
}

/// A port nothing listens on (bound, then let go).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn ask_json_keeps_its_request_id_and_refuses_one_reused_for_other_questions() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let _bot = askgate(&[
        "bot",
        "--addr",
        &url,
        "--session",
        "deploys",
        "--policy",
        "first",
    ]);
    let dir = TempDir::new();
    let ask = |question: &str| {
        serde_json::json!({
            "session_id": "deploys",
            "request_id": "deploy-1",
            "questions": [{"id": "go", "question": question,
                           "options": [{"label": "Yes"}, {"label": "No"}]}],
        })
        .to_string()
    };
    let file = dir.file("ask.json", ask("Deploy v2?"));
    let file = file.to_str().expect("utf-8");
    let run = || askgate(&["ask", "--addr", &url, "--hold", "--json", file]);

    let (code, first, stderr) = finish(run()).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("(request_id deploy-1)"), "{stderr}");
    let first: Value = serde_json::from_str(first.trim()).expect("JSON");
    assert_eq!(first["answers"][0]["selected"][0], "Yes");
    // The same file again is the same ask: its answer, not a second question.
    let (code, again, stderr) = finish(run()).await;
    assert_eq!(code, 0, "{stderr}");
    let again: Value = serde_json::from_str(again.trim()).expect("JSON");
    assert_eq!(again["rpc_id"], first["rpc_id"], "{again}");

    let other = dir.file("other.json", ask("Drop the production database?"));
    let other = other.to_str().expect("utf-8");
    let reused = askgate(&["ask", "--addr", &url, "--hold", "--json", other]);
    let (code, stdout, stderr) = finish(reused).await;
    assert_eq!(code, 7, "refused: {stderr}");
    assert!(stdout.is_empty(), "never the other ask's answer: {stdout}");
    let error = error_of(&stderr);
    assert_eq!(error["error"]["reason"], "REQUEST_ID_REUSED", "{stderr}");
    assert_eq!(error["error"]["code"], "AlreadyExists", "{stderr}");
}

#[tokio::test]
async fn without_a_server_commands_name_the_address_and_ask_waits_for_it() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    for command in ["pending", "watch"] {
        let (code, _, stderr) = finish(askgate(&[command, "--addr", &url, "--session", "s"])).await;
        assert_eq!(code, 9, "{command}: {stderr}");
        let message = error_of(&stderr)["error"]["message"].to_string();
        assert!(
            message.contains(&format!("cannot reach askgate at {url} (")),
            "{command}: {message}"
        );
        assert!(message.contains("Connection refused"), "{message}");
        assert!(
            message.contains("is `askgate serve` running there?"),
            "{message}"
        );
    }

    // `ask` says so at once, then retries its first connect until the server is up.
    let mut ask = askgate(&[
        "ask",
        "--addr",
        &url,
        "--session",
        "s",
        "--question",
        "Go?",
        "--option",
        "Yes",
        "--hold",
        "--retry-for",
        "60s",
    ]);
    let mut stderr = BufReader::new(ask.stderr.take().expect("stderr")).lines();
    let first = within("ask's first line", stderr.next_line())
        .await
        .expect("read")
        .expect("a line");
    assert!(
        first.starts_with(&format!("askgate: cannot reach askgate at {url} (")),
        "{first}"
    );
    let second = within("ask's second line", stderr.next_line())
        .await
        .expect("read")
        .expect("a line");
    assert_eq!(second, "askgate: retrying for up to 1m (--retry-for)");
    let listen = format!("127.0.0.1:{port}");
    let _serve = askgate(&["serve", "--backend", "memory", "--listen", &listen]);
    let _bot = askgate(&["bot", "--addr", &url, "--session", "s", "--policy", "first"]);
    let (code, stdout, _) = finish(ask).await;
    assert_eq!(code, 0, "answered once the server came: {stdout}");
    let answer: Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(answer["answers"][0]["selected"][0], "Yes");
}

/// Keys of tenant acme: an agent that asks (and could answer), and two approvers.
async fn approval_keys(dir: &TempDir) -> (String, [String; 3]) {
    let file = dir.0.join("keys.json");
    let path = file.to_str().expect("utf-8").to_owned();
    let mut keys = Vec::new();
    for (sub, roles) in [("agent-7", "agent,ui"), ("al", "ui"), ("bo", "ui")] {
        let add = askgate(&[
            "keys", "add", "--file", &path, "--tenant", "acme", "--sub", sub, "--roles", roles,
        ]);
        let (code, stdout, stderr) = finish(add).await;
        assert_eq!(code, 0, "{stderr}");
        keys.push(stdout.trim().to_owned());
    }
    (path, keys.try_into().expect("three keys"))
}

/// The rpc_id of the session's one pending ask, once there is one.
async fn pending_one(url: &str, token: &str, session: &str) -> Value {
    crate::support::eventually("the ask to be pending", || async {
        let list = askgate(&[
            "pending",
            "--addr",
            url,
            "--token",
            token,
            "--session",
            session,
        ]);
        let (code, stdout, stderr) = finish(list).await;
        assert_eq!(code, 0, "{stderr}");
        let listed: Value = serde_json::from_str(stdout.trim()).expect("JSON");
        listed["pending"].get(0).cloned()
    })
    .await
}

#[tokio::test]
async fn approvals_from_flags_say_what_each_answer_did() {
    let dir = TempDir::new();
    let (keys, [agent, al, bo]) = approval_keys(&dir).await;
    let serve = ServeProcess::start_with(&["--auth", "keys", "--keys-file", &keys]).await;
    let url = serve.url.clone();
    let ask = askgate(&[
        "ask",
        "--addr",
        &url,
        "--token",
        &agent,
        "--session",
        "release",
        "--hold",
        "--question",
        "Deploy v2 to prod?",
        "--option",
        "Approve",
        "--option",
        "Reject",
        "--action",
        "deploy",
        "--arguments",
        r#"{"env": "prod", "version": "2"}"#,
        "--quorum",
        "2",
        "--allowed-channel",
        "cli",
    ]);
    let pending = pending_one(&url, &al, "release").await;
    let rpc_id = pending["rpc_id"].as_str().expect("rpc_id").to_owned();
    assert_eq!(pending["action"]["name"], "deploy", "{pending}");
    let arguments: Value = serde_json::from_str(
        pending["action"]["arguments_json"]
            .as_str()
            .expect("arguments"),
    )
    .expect("JSON arguments");
    assert_eq!(
        arguments,
        serde_json::json!({"env": "prod", "version": "2"})
    );
    assert_eq!(pending["quorum"]["count"], 2, "{pending}");
    assert_eq!(pending["allowed_channels"][0], "cli", "{pending}");

    let vote = |token: &str, label: &str| {
        askgate(&[
            "answer",
            "--addr",
            &url,
            "--token",
            token,
            "--session",
            "release",
            "--rpc-id",
            &rpc_id,
            "--select",
            &format!("q1={label}"),
        ])
    };
    let (code, _, stderr) = finish(vote(&al, "Approve")).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "recorded your vote on ask {rpc_id} in session release: 1 of 2 approvals; it \
             resolves when 1 more give the same answers"
        )),
        "a vote is not an answer: {stderr}"
    );
    // Refusals exit 7, as every refusal does.
    for (token, reason) in [(&al, "ALREADY_APPROVED"), (&agent, "SELF_APPROVAL")] {
        let (code, _, stderr) = finish(vote(token, "Approve")).await;
        assert_eq!(code, 7, "{reason}: {stderr}");
        assert_eq!(error_of(&stderr)["error"]["reason"], reason, "{stderr}");
    }
    // Another channel is refused, naming the ones allowed.
    let mut grpc = serve.client().await.with_token(&bo).expect("token");
    let refused = grpc
        .answer(
            "release",
            &rpc_id,
            vec![askgate_client::answer::select("q1", ["Approve"])],
        )
        .await
        .expect_err("not from grpc");
    assert_eq!(refused.reason(), askgate_client::Reason::ChannelNotAllowed);
    assert!(
        refused.message().ends_with("only from cli"),
        "{}",
        refused.message()
    );
    // A second approver who disagrees: nobody cancelled, and the agent is told so.
    let (code, _, stderr) = finish(vote(&bo, "Reject")).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = finish(ask).await;
    assert_eq!(code, 3, "{stderr}");
    let error = error_of(&stderr);
    let message = error["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("the question was not answered: the approvers disagreed"),
        "{message}"
    );
    assert!(!message.contains("the user cancelled"), "{message}");
    assert_eq!(
        error["error"]["metadata"]["cancel_source"], "APPROVERS_DISAGREED",
        "{stderr}"
    );
}

#[tokio::test]
async fn an_ask_that_resolves_with_its_default_exits_10_with_the_default() {
    let serve = ServeProcess::start().await;
    let ask = askgate(&[
        "ask",
        "--addr",
        &serve.url,
        "--session",
        "nightly",
        "--hold",
        "--question",
        "Run the migration?",
        "--option",
        "Approve",
        "--option",
        "Reject",
        "--ttl",
        "1s",
        "--default",
        "q1=Reject",
        // An action with no --arguments approves it with none ({}).
        "--action",
        "migrate",
    ]);
    let (code, stdout, stderr) = finish(ask).await;
    assert_eq!(code, 10, "DEFAULTED is not a person's answer: {stderr}");
    let response: Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(response["resolution"], "DEFAULTED", "{response}");
    assert_eq!(response["answers"][0]["selected"][0], "Reject");
    assert!(stderr.contains("exit code 10"), "{stderr}");
}

#[tokio::test]
async fn a_second_serve_says_what_is_in_use_and_the_key_is_made_once() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("utf-8");
    let sqlite = ["--backend", "sqlite", "--data-dir", data];
    let mut first = ServeProcess::start_with(&sqlite).await;
    assert!(first.logged("made the sealing key"), "said when made");
    assert!(
        !first.logged("WARN"),
        "a first start warns of nothing: {:?}",
        first.kill_and_read_log().await
    );
    let listen = first.url.trim_start_matches("http://").to_owned();
    let port = listen.rsplit_once(':').expect("port").1.to_owned();

    // The same data directory: said before the port.
    let mut args = vec!["serve", "--listen", &listen];
    args.extend(sqlite);
    let (code, _, stderr) = finish(askgate(&args)).await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains("is in use by another askgate process"),
        "{stderr}"
    );
    assert!(!stderr.contains("Address already in use"), "{stderr}");

    // Another data directory on the same port: the port and who holds it.
    let other = dir.0.join("other");
    let other = other.to_str().expect("utf-8");
    let (code, _, stderr) = finish(askgate(&[
        "serve",
        "--listen",
        &listen,
        "--backend",
        "sqlite",
        "--data-dir",
        other,
    ]))
    .await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "port {port} is already in use by pid {} (",
            first.pid
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--listen"), "says the way out: {stderr}");

    // Started again, the node finds its key: nothing said.
    first.kill_and_read_log().await;
    let again = ServeProcess::start_with(&sqlite).await;
    assert!(!again.logged("sealing key"), "said once");
}
