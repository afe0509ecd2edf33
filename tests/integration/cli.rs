//! The `askgate` CLI end to end, as processes: `serve`, `ask`, `bot`, `watch`,
//! `pending` and `answer`, with their documented exit codes.

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout},
};

use crate::support::{ServeProcess, TempDir, askgate, finish, within};

fn lines(child: &mut Child) -> Lines<BufReader<ChildStdout>> {
    BufReader::new(child.stdout.take().expect("stdout")).lines()
}

async fn next_json(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = within("a JSON line", lines.next_line())
        .await
        .expect("read")
        .expect("the process ended its output");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// Waits for a `requested` line on a `watch` process and returns its rpc_id.
async fn watched_request(watch: &mut Lines<BufReader<ChildStdout>>) -> String {
    loop {
        let event = next_json(watch).await;
        if let Some(id) = event["requested"]["rpc_id"].as_str() {
            return id.to_owned();
        }
    }
}

#[tokio::test]
async fn serve_bot_watch_and_ask_as_processes() {
    let mut serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let mut watch = askgate(&["watch", "--addr", &url, "--session", "demo"]);
    let mut watch_out = lines(&mut watch);
    let synced = next_json(&mut watch_out).await;
    assert!(synced.get("synced").is_some(), "{synced}");
    let _bot = askgate(&[
        "bot",
        "--addr",
        &url,
        "--session",
        "demo",
        "--policy",
        "first",
    ]);

    let ask = askgate(&[
        "ask",
        "--addr",
        &url,
        "--session",
        "demo",
        "--question",
        "Which database?",
        "--option",
        "Postgres=relational",
        "--option",
        "SQLite",
    ]);
    let (code, stdout, stderr) = finish(ask).await;
    assert_eq!(code, 0, "stderr: {stderr}");
    let response: Value = serde_json::from_str(stdout.trim()).expect("JSON answer");
    assert_eq!(response["answers"][0]["id"], "q1");
    assert_eq!(response["answers"][0]["selected"][0], "Postgres");
    let rpc_id = response["rpc_id"].as_str().expect("rpc_id").to_owned();

    let requested = watched_request(&mut watch_out).await;
    assert_eq!(requested, rpc_id);
    let resolved = next_json(&mut watch_out).await;
    assert_eq!(resolved["resolved"]["rpc_id"], rpc_id.as_str());
    assert_eq!(resolved["resolved"]["reason"], "ANSWERED");

    // SIGTERM: the server drains, ends the watch stream, and exits cleanly.
    serve.signal("TERM");
    assert_eq!(serve.exit_code().await, Some(0));
    let (code, _, stderr) = finish(watch).await;
    assert_eq!(
        code, 0,
        "watch ends cleanly when the server ends its stream: {stderr}"
    );
}

#[tokio::test]
async fn pending_and_answer_resolve_an_ask_from_the_command_line() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let mut watch = askgate(&["watch", "--addr", &url, "--session", "manual"]);
    let mut watch_out = lines(&mut watch);
    next_json(&mut watch_out).await; // synced

    let ask = askgate(&[
        "ask",
        "--addr",
        &url,
        "--session",
        "manual",
        "--question",
        "Ship it?",
        "--id",
        "ship",
        "--option",
        "yes",
        "--option",
        "no",
    ]);
    let rpc_id = watched_request(&mut watch_out).await;

    let pending = askgate(&["pending", "--addr", &url, "--session", "manual"]);
    let (code, stdout, _) = finish(pending).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(listed["pending"][0]["rpc_id"], rpc_id.as_str());

    // An invalid answer is refused with exit code 6 and leaves the ask pending.
    let invalid = askgate(&[
        "answer",
        "--addr",
        &url,
        "--session",
        "manual",
        "--rpc-id",
        &rpc_id,
        "--select",
        "ship=maybe",
    ]);
    let (code, _, stderr) = finish(invalid).await;
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("BAD_ANSWER"), "{stderr}");

    let answer = askgate(&[
        "answer",
        "--addr",
        &url,
        "--session",
        "manual",
        "--rpc-id",
        &rpc_id,
        "--select",
        "ship=no",
    ]);
    let (code, _, stderr) = finish(answer).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("answered ask {rpc_id} in session manual")),
        "says what it did: {stderr}"
    );
    let (code, stdout, stderr) = finish(ask).await;
    assert_eq!(code, 0, "{stderr}");
    let response: Value = serde_json::from_str(stdout.trim()).expect("JSON answer");
    assert_eq!(response["answers"][0]["selected"][0], "no");

    // A second answer loses: NOT_PENDING, exit code 8.
    let late = askgate(&[
        "answer",
        "--addr",
        &url,
        "--session",
        "manual",
        "--rpc-id",
        &rpc_id,
        "--select",
        "ship=yes",
    ]);
    let (code, _, stderr) = finish(late).await;
    assert_eq!(code, 8, "{stderr}");
    let report: Value = serde_json::from_str(stderr.trim()).expect("the error as JSON");
    let metadata = &report["error"]["metadata"];
    assert_eq!(report["error"]["reason"], "NOT_PENDING", "{stderr}");
    assert_eq!(metadata["resolution"], "ANSWERED", "{stderr}");
    assert_eq!(metadata["resolved_by"], "anonymous", "who won: {stderr}");
}

#[tokio::test]
async fn a_cancelled_ask_exits_3_with_the_reason() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let _bot = askgate(&[
        "bot",
        "--addr",
        &url,
        "--all-sessions",
        "--policy",
        "cancel",
        "--reason",
        "not now",
    ]);
    let mut watch = askgate(&["watch", "--addr", &url, "--all-sessions"]);
    let mut watch_out = lines(&mut watch);
    next_json(&mut watch_out).await; // synced
    let ask = askgate(&[
        "ask",
        "--addr",
        &url,
        "--session",
        "c",
        "--question",
        "Free text?",
    ]);
    let (code, _, stderr) = finish(ask).await;
    assert_eq!(code, 3, "{stderr}");
    let error: Value =
        serde_json::from_str(stderr.trim().lines().last().expect("a line")).expect("JSON error");
    assert_eq!(error["error"]["reason"], "ASK_CANCELLED");
    assert_eq!(error["error"]["metadata"]["reason"], "not now");
    // A person's (here a bot's) cancel: no `cancel_source`, unlike a UI closing.
    assert!(
        error["error"]["metadata"].get("cancel_source").is_none(),
        "{stderr}"
    );
}

/// `ask --approvers`: an ask naming others is refused to the bot (a person who is no
/// approver, here `anonymous`), which changes nothing: it expires; one naming the bot is
/// answered by it.
#[tokio::test]
async fn ask_names_who_may_answer() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let mut watch = askgate(&["watch", "--addr", &url, "--all-sessions"]);
    let mut watch_out = lines(&mut watch);
    next_json(&mut watch_out).await; // synced
    let ask = |approvers: &str, extra: &[&str]| {
        let mut args = vec![
            "ask",
            "--addr",
            &url,
            "--session",
            "a",
            "--question",
            "Deploy?",
            "--option",
            "yes",
            "--approvers",
            approvers,
        ];
        args.extend_from_slice(extra);
        askgate(&args)
    };
    let theirs = ask(
        "ana,group:ops",
        &["--approvers-cancel-too", "--timeout", "3s"],
    );
    let requested = loop {
        let event = next_json(&mut watch_out).await;
        if event["requested"].is_object() {
            break event;
        }
    };
    let approvers = &requested["requested"]["approvers"];
    assert_eq!(
        approvers["subjects"],
        serde_json::json!(["ana"]),
        "{requested}"
    );
    assert_eq!(
        approvers["groups"],
        serde_json::json!(["ops"]),
        "{requested}"
    );
    assert_eq!(approvers["cancel_too"], true, "{requested}");
    let rpc_id = requested["requested"]["rpc_id"].as_str().expect("rpc_id");
    let answer = askgate(&[
        "answer",
        "--addr",
        &url,
        "--session",
        "a",
        "--rpc-id",
        rpc_id,
        "--select",
        "q1=yes",
    ]);
    let (code, _, stderr) = finish(answer).await;
    assert_eq!(code, 7, "refused: {stderr}");
    assert!(stderr.contains("NOT_AN_APPROVER"), "{stderr}");
    assert!(
        stderr.contains("only ana or a member of ops may answer this"),
        "{stderr}"
    );
    let (code, _, stderr) = finish(theirs).await;
    assert_eq!(code, 4, "nothing changed, so it expired: {stderr}");

    let _bot = askgate(&["bot", "--addr", &url, "--all-sessions", "--policy", "first"]);
    let (code, stdout, stderr) = finish(ask("Anonymous", &[])).await;
    assert_eq!(code, 0, "{stderr}");
    let answered: Value = serde_json::from_str(&stdout).expect("the AskResponse");
    assert_eq!(answered["resolved_by"], "anonymous", "{stdout}");
}

/// `askgate people`: put, list and delete the tenant's people; an identity another
/// person holds is a usage error of the request (exit 6), a missing person exit 8.
#[tokio::test]
async fn people_are_managed_from_the_command_line() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let people = |args: &[&str]| {
        let mut all = vec!["people"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--addr", &url]);
        askgate(&all)
    };
    let (code, stdout, stderr) = finish(people(&[
        "put",
        "ana",
        "--name",
        "Ana",
        "--group",
        "ops",
        "--identity",
        "subject:ana",
        "--identity",
        "slack:T1/U2",
        "--delegate-to",
        "bo",
        "--away-for",
        "7d",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let ana: Value = serde_json::from_str(&stdout).expect("the person");
    assert_eq!(ana["display_name"], "Ana", "{stdout}");
    assert_eq!(ana["identities"][1]["value"], "t1/u2", "{stdout}");
    assert_eq!(ana["delegate"]["to_person"], "bo", "{stdout}");
    let (code, _, stderr) = finish(people(&["put", "bo", "--identity", "slack:t1:u2"])).await;
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("belongs to person"), "{stderr}");
    let (code, stdout, _) = finish(people(&["list"])).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&stdout).expect("the people");
    assert_eq!(listed["people"][0]["id"], "ana", "{stdout}");
    let (code, _, _) = finish(people(&["delete", "ana"])).await;
    assert_eq!(code, 0);
    let (code, _, stderr) = finish(people(&["delete", "ana"])).await;
    assert_eq!(code, 8, "{stderr}");
}

#[tokio::test]
async fn serve_without_auth_on_a_public_address_refuses_and_says_how_to_fix_it() {
    let (code, _, stderr) = finish(askgate(&["serve", "--listen", "0.0.0.0:0"])).await;
    assert_eq!(code, 64, "{stderr}");
    for fix in ["--auth keys", "--auth jwt", "--allow-anonymous"] {
        assert!(stderr.contains(fix), "the message names {fix}: {stderr}");
    }
}

/// docs/console.md "Signing in with your identity provider": the sign-in needs a role
/// map, a server that knows its callers, and an issuer it can discover; each refusal
/// says what to give.
#[tokio::test]
async fn the_console_sign_in_refuses_what_cannot_work_and_says_why() {
    let serve = ["serve", "--listen", "127.0.0.1:0", "--backend", "memory"];
    let issuer = [
        "--oidc-issuer",
        "http://127.0.0.1:9",
        "--oidc-client-id",
        "askgate",
    ];
    let (code, _, stderr) = finish(askgate(&[&serve[..], &issuer].concat())).await;
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--oidc-role-map"), "{stderr}");
    let mapped = [&serve[..], &issuer, &["--oidc-role-map", "ops=ui"]].concat();
    let (code, _, stderr) = finish(askgate(&mapped)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("--auth keys"), "with --auth none: {stderr}");
    let dir = crate::support::TempDir::new();
    let keys = dir.0.join("keys.json");
    let keys = keys.to_str().expect("utf-8 path");
    let add = [
        "keys", "add", "--file", keys, "--tenant", "acme", "--sub", "a", "--roles", "ui",
    ];
    assert_eq!(finish(askgate(&add)).await.0, 0);
    let keyed = [&mapped[..], &["--auth", "keys", "--keys-file", keys]].concat();
    let (code, _, stderr) = finish(askgate(&keyed)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--oidc-issuer http://127.0.0.1:9"),
        "an issuer that cannot be discovered is named: {stderr}"
    );
}

/// docs/protocol.md "Security": a metrics listener off loopback needs a token or an explicit
/// `--metrics-allow-anonymous`.
#[tokio::test]
async fn metrics_off_loopback_need_a_token_or_an_explicit_anonymous() {
    let (code, _, stderr) = finish(askgate(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        "0.0.0.0:0",
    ]))
    .await;
    assert_eq!(code, 64, "{stderr}");
    for fix in ["--metrics-token-file", "--metrics-allow-anonymous"] {
        assert!(stderr.contains(fix), "the message names {fix}: {stderr}");
    }
    let serve =
        ServeProcess::start_with(&["--metrics", "0.0.0.0:0", "--metrics-allow-anonymous"]).await;
    serve
        .client()
        .await
        .list_pending("s")
        .await
        .expect("serving, with anonymous metrics");
}

#[tokio::test]
async fn usage_errors_exit_64() {
    for args in [
        &["ask", "--session"][..],
        &["serve", "--max-questions", "0", "--listen", "127.0.0.1:0"][..],
        &["ask", "--session", "s"][..],
        &["bot", "--session", "s", "--policy", "custom"][..],
    ] {
        let (code, _, stderr) = finish(askgate(args)).await;
        assert_eq!(code, 64, "askgate {args:?}: {stderr}");
    }
}

#[tokio::test]
async fn attach_holds_a_lease_that_ask_can_name() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let _bot = askgate(&["bot", "--addr", &url, "--all-sessions"]);
    let mut attach = askgate(&["attach", "--addr", &url, "--agent-id", "planner"]);
    let mut attach_out = lines(&mut attach);
    let lease = next_json(&mut attach_out).await;
    assert_eq!(lease["agent_id"], "planner");
    let incarnation = lease["incarnation"]
        .as_str()
        .expect("incarnation")
        .to_owned();

    let ask_as = |incarnation: &str| {
        askgate(&[
            "ask",
            "--addr",
            &url,
            "--session",
            "a",
            "--question",
            "Go?",
            "--option",
            "yes",
            "--agent-id",
            "planner",
            "--incarnation",
            incarnation,
        ])
    };
    let (code, stdout, stderr) = finish(ask_as(&incarnation)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"yes\""), "{stdout}");

    // Once the lease is gone the incarnation is no longer live: exit code 7.
    attach.start_kill().expect("kill attach");
    within("attach to die", attach.wait()).await.expect("wait");
    crate::support::eventually("the lease to end", || {
        let ask = ask_as(&incarnation);
        async move {
            let (code, _, stderr) = finish(ask).await;
            (code == 7 && stderr.contains("CALLER_NOT_LIVE")).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn a_10_mib_request_is_refused_without_the_server_growing() {
    let serve = ServeProcess::start().await;
    let mut client = askgate_client::Client::connect(serve.url.clone())
        .await
        .expect("connect");
    let before = serve.rss_kib();
    let huge = askgate_client::Ask::new("s")
        .question(askgate_client::question("q", &"x".repeat(10 * 1024 * 1024)))
        .no_retry();
    let err = client.ask(huge).await.expect_err("too large");
    assert_eq!(err.reason(), askgate_client::Reason::BadRequest);
    assert_eq!(err.violations()[0].0, "request");
    // The server reads up to its 4 MiB message limit and refuses the rest: it may grow
    // by about that much (the buffer and the allocator's slack, which vary from run to
    // run), never by the 10 MiB a server that took the whole request would.
    let grown = serve.rss_kib().saturating_sub(before);
    assert!(
        grown < 8 * 1024,
        "the server grew by {grown} KiB for a refused 10 MiB request"
    );
}

#[tokio::test]
async fn sighup_reloads_keys_ending_the_revoked_keys_streams_and_keeping_others_open() {
    let dir = crate::support::TempDir::new();
    let keys_file = dir.0.join("keys.json");
    let keys_path = keys_file.to_str().expect("utf-8 path").to_owned();
    let mut keys = Vec::new();
    for sub in ["revoked", "kept"] {
        let add = askgate(&[
            "keys", "add", "--file", &keys_path, "--tenant", "acme", "--sub", sub, "--roles",
            "ui,agent",
        ]);
        let (code, stdout, stderr) = finish(add).await;
        assert_eq!(code, 0, "{stderr}");
        keys.push(stdout.trim().to_owned());
    }
    let serve = ServeProcess::start_with(&["--auth", "keys", "--keys-file", &keys_path]).await;
    let connect = |key: String| {
        let url = serve.url.clone();
        async move {
            askgate_client::Client::connect(url)
                .await
                .expect("connect")
                .with_token(&key)
                .expect("token")
        }
    };
    let mut revoked = connect(keys[0].clone()).await;
    let mut kept = connect(keys[1].clone()).await;
    revoked
        .list_pending("s")
        .await
        .expect("the key works before the reload");
    let mut revoked_stream = revoked.subscribe_session("s").await.expect("subscribe");
    crate::support::until_synced(&mut revoked_stream).await;
    let mut revoked_lease = revoked.attach("agent-1", "").await.expect("attach");
    let mut stream = kept.subscribe_session("s").await.expect("subscribe");
    crate::support::until_synced(&mut stream).await;

    // Drop the first key from the file, then SIGHUP.
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&keys_file).expect("read")).expect("json");
    file["keys"]
        .as_array_mut()
        .expect("keys")
        .retain(|k| k["sub"] != "revoked");
    std::fs::write(&keys_file, file.to_string()).expect("write");
    serve.signal("HUP");
    crate::support::eventually("the revoked key to stop working", || {
        let mut revoked = revoked.clone();
        async move {
            match revoked.list_pending("s").await {
                Err(e) if e.reason() == askgate_client::Reason::Unauthenticated => Some(()),
                _ => None,
            }
        }
    })
    .await;
    // The revoked key's open streams end with UNAUTHENTICATED (docs/protocol.md "Security").
    use tokio_stream::StreamExt as _;
    match crate::support::within("the revoked stream to end", revoked_stream.next()).await {
        Some(Err(e)) => assert_eq!(e.reason(), askgate_client::Reason::Unauthenticated),
        other => panic!("expected UNAUTHENTICATED, got {other:?}"),
    }
    let ended = crate::support::within("the revoked lease to end", revoked_lease.ended()).await;
    assert_eq!(
        ended.map(|e| e.reason()),
        Some(askgate_client::Reason::Unauthenticated)
    );

    // The other key's stream is still open and live.
    let ask = askgate_client::Ask::new("s")
        .question(askgate_client::question("q", "still there?"))
        .timeout(std::time::Duration::from_millis(200));
    let _ = kept.clone().ask(ask).await;
    crate::support::next_requested(&mut stream).await;
}

#[tokio::test]
async fn health_exits_0_on_a_serving_node_and_9_when_none_answers() {
    let server = ServeProcess::start().await;
    let (code, stdout, stderr) = finish(askgate(&["health", "--addr", &server.url])).await;
    assert_eq!((code, stdout.trim()), (0, "SERVING"), "{stderr}");
    let (code, stdout, stderr) = finish(askgate(&[
        "health",
        "--addr",
        &server.url,
        "--service",
        "askgate.v1.UserQuestions",
    ]))
    .await;
    assert_eq!((code, stdout.trim()), (0, "SERVING"), "{stderr}");

    // A port nobody listens on: the probe fails fast, saying so.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let (code, _, stderr) = finish(askgate(&[
        "health",
        "--addr",
        &format!("http://{addr}"),
        "--timeout",
        "2s",
    ]))
    .await;
    assert_eq!(code, 9, "{stderr}");
    assert!(stderr.contains("unreachable"), "{stderr}");
}

#[tokio::test]
async fn serve_takes_its_settings_from_a_config_file() {
    let dir = TempDir::new();
    let config = dir.file(
        "askgate.toml",
        "listen = \"127.0.0.1:0\"\nconsole = false\nmax-questions = 1\n",
    );
    let server = ServeProcess::start_with(&["--config", config.to_str().expect("utf-8")]).await;
    let mut client = server.client().await;
    let refused = client
        .ask(
            askgate_client::Ask::new("s")
                .question(askgate_client::question("a", "A?"))
                .question(askgate_client::question("b", "B?"))
                .hold_unattended(),
        )
        .await
        .expect_err("two questions are over the file's max-questions");
    assert_eq!(
        refused.reason(),
        askgate_client::Reason::BadRequest,
        "{refused}"
    );
}

/// docs/protocol.md "Security": a Redis URL's password never reaches the log, not even when the
/// connection fails at startup.
#[tokio::test]
async fn a_redis_password_never_reaches_the_log() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let url = format!("redis://:hunter2-secret@127.0.0.1:{port}/0");
    let serve = askgate(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--backend",
        "redis",
        "--redis-url",
        &url,
    ]);
    let (code, stdout, stderr) = finish(serve).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("redis://:***@127.0.0.1:{port}/0")),
        "the failure names the redacted URL: {stderr}"
    );
    assert!(
        !stderr.contains("hunter2") && !stdout.contains("hunter2"),
        "{stderr}"
    );
}

/// `--token-file` (and ASKGATE_TOKEN_FILE) keep the credential out of process
/// listings; a file others may read gets a warning; a token given twice is a usage
/// error.
#[tokio::test]
async fn client_commands_read_their_token_from_a_file() {
    let dir = crate::support::TempDir::new();
    let keys_path = dir.0.join("keys.json");
    let keys_path = keys_path.to_str().expect("utf-8 path").to_owned();
    let add = askgate(&[
        "keys", "add", "--file", &keys_path, "--tenant", "acme", "--sub", "ana", "--roles", "ui",
    ]);
    let (code, key, stderr) = finish(add).await;
    assert_eq!(code, 0, "{stderr}");
    let serve = ServeProcess::start_with(&["--auth", "keys", "--keys-file", &keys_path]).await;
    let token_file = dir.file("token", format!("{}\n", key.trim()));
    let token_path = token_file.to_str().expect("utf-8 path");
    #[cfg(unix)]
    let chmod = |mode: u32| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    };
    #[cfg(unix)]
    chmod(0o600);

    let pending = |extra: &[&str]| {
        let mut args = vec!["pending", "--session", "s", "--addr", &serve.url];
        args.extend_from_slice(extra);
        askgate(&args)
    };
    let (code, stdout, stderr) = finish(pending(&["--token-file", token_path])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.trim().starts_with(['{', '[']), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");

    #[cfg(unix)]
    {
        chmod(0o644);
        let (code, _, stderr) = finish(pending(&["--token-file", token_path])).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stderr.contains("chmod 600"), "{stderr}");
    }

    let (code, _, stderr) = finish(pending(&["--token-file", token_path, "--token", "x"])).await;
    assert_eq!(code, 64, "{stderr}");
    let (code, _, stderr) = finish(pending(&[])).await;
    assert_ne!(code, 0, "without a credential: {stderr}");
}

/// A memory node's restart loses its asks: a waiting `askgate ask` retries for its
/// retry budget, then fails with the last error instead of retrying forever.
#[tokio::test]
async fn ask_stops_retrying_when_its_retry_budget_runs_out() {
    let mut serve = ServeProcess::start().await;
    let agent = askgate(&[
        "ask",
        "--addr",
        &serve.url,
        "--session",
        "s",
        "--question",
        "Proceed?",
        "--hold",
        "--retry-for",
        "1s",
    ]);
    let mut client = serve.client().await;
    crate::support::eventually("the ask to be pending", || {
        let mut client = client.clone();
        async move { (!client.list_pending("s").await.ok()?.is_empty()).then_some(()) }
    })
    .await;
    serve.signal("TERM");
    assert_eq!(serve.exit_code().await, Some(0), "the node drained");
    let (code, _, stderr) = finish(agent).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("SHUTTING_DOWN")
            || stderr.contains("UNAVAILABLE")
            || stderr.contains("navailable"),
        "{stderr}"
    );
    let _ = client
        .list_pending("s")
        .await
        .expect_err("the node is gone");
}

/// `askgate webhooks`: add (the secret shown once), list, deliveries, rm; unknown ids
/// exit 8 (NOT_FOUND), invalid input 6, and `ask --remind-after` sets the schedule.
#[tokio::test]
async fn webhooks_are_managed_from_the_command_line() {
    let server = ServeProcess::start_with(&["--webhook-allow-private"]).await;
    let url = server.url.clone();
    let run = |args: &[&str]| {
        let mut all = vec!["webhooks"];
        all.extend_from_slice(args);
        all.extend(["--addr", &url]);
        finish(askgate(&all))
    };
    let (code, stdout, stderr) = run(&[
        "add",
        "--url",
        "http://127.0.0.1:9/hook",
        "--event",
        "ask.resolved",
        "--label",
        "team=infra",
        "--description",
        "audit",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let created: Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(
        created["secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("whsec_")),
        "{created}"
    );
    assert_eq!(created["events"], serde_json::json!(["ask.resolved"]));
    assert_eq!(created["labels"]["team"], "infra");
    assert_eq!(
        created["provides"],
        Value::Null,
        "not a provider: false is left out"
    );
    let id = created["id"].as_str().expect("id").to_owned();

    let (code, stdout, _) = run(&["list"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(listed["endpoints"][0]["id"], id.as_str());
    assert_eq!(
        listed["endpoints"][0]["secret"],
        Value::Null,
        "the secret is shown once"
    );
    let (code, stdout, _) = run(&["deliveries", "--status", "failed"]).await;
    assert_eq!((code, stdout.trim()), (0, "{}"));

    let (code, _, stderr) = run(&[
        "add",
        "--url",
        "http://127.0.0.1:9/x",
        "--event",
        "ask.nope",
    ])
    .await;
    assert_eq!(code, 6, "{stderr}");
    assert!(stderr.contains("BAD_REQUEST"), "{stderr}");
    let (code, _, _) = run(&["rm", &id]).await;
    assert_eq!(code, 0);
    let (code, _, stderr) = run(&["rm", &id]).await;
    assert_eq!(code, 8, "{stderr}");
    assert!(stderr.contains("NOT_FOUND"), "{stderr}");
    let (code, _, stderr) = run(&["redeliver", "msg_missing"]).await;
    assert_eq!(code, 8, "{stderr}");

    let (code, _, stderr) = finish(askgate(&[
        "ask",
        "--addr",
        &url,
        "--session",
        "s",
        "--question",
        "ok?",
        "--hold",
        "--remind-after",
        "500ms",
        "--timeout",
        "1s",
    ]))
    .await;
    assert_eq!(code, 6, "a reminder sooner than 1s is refused: {stderr}");
    assert!(stderr.contains("notify.remind_after_ms"), "{stderr}");
}

/// `askgate ask` says on stderr what it waits for, and on NO_PROVIDER how to get
/// someone to follow the session; the error JSON (the model-facing text) is unchanged
/// and stays the last line.
#[tokio::test]
async fn ask_says_what_it_waits_for_and_the_way_out_of_no_provider() {
    let serve = ServeProcess::start().await;
    let url = serve.url.clone();
    let flags = ["--session", "team-a/review", "--question", "Ship it?"];
    let mut args = vec!["ask", "--addr", &url];
    args.extend(flags);
    let (code, _, stderr) = finish(askgate(&args)).await;
    assert_eq!(code, 7, "{stderr}");
    let mut lines = stderr.trim().lines();
    let report: Value =
        serde_json::from_str(lines.next_back().expect("a line")).expect("the error as JSON");
    assert_eq!(
        report["error"]["message"], "no user-questions provider is registered",
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "askgate: nobody follows session team-a/review: start `askgate answer --session \
             team-a/review` (or open the console at {url}/console/#/sessions/team-a/review) first, or \
             pass --hold to wait until someone does"
        )),
        "{stderr}"
    );

    // Held: the line says what it waits for while it waits.
    let mut args = vec!["ask", "--addr", &url, "--hold", "--request-id", "deploy-42"];
    args.extend(flags);
    let mut held = askgate(&args);
    let mut err = BufReader::new(held.stderr.take().expect("stderr")).lines();
    let line = within("the waiting line", err.next_line())
        .await
        .expect("read")
        .expect("a line");
    assert_eq!(
        line,
        format!(
            "askgate: asking in session team-a/review (request_id deploy-42); waiting for an \
             answer from `askgate answer --session team-a/review` or the console at \
             {url}/console/#/sessions/team-a/review"
        )
    );
    held.start_kill().expect("kill");
}
