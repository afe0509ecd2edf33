//! `askgate answer`'s overlay in a real terminal: tmux runs it against a real server
//! while `askgate ask` processes ask; keys go in with `send-keys`, the screen comes out
//! with `capture-pane`, and the asking processes' output says what the agent got.

use std::time::Duration;

use serde_json::Value;

use crate::support::{ASKGATE, ServeProcess, askgate, askgate_command, finish, within};

/// A tmux server of its own (its own socket), with the overlay in one window; killed
/// when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `askgate answer` with `args` in a 100x30 terminal.
    fn answer(url: &str, args: &[&str]) -> Self {
        let socket = format!(
            "askgate-test-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let mut command = vec![
            ASKGATE.to_owned(),
            "answer".into(),
            "--addr".into(),
            url.to_owned(),
        ];
        command.extend(args.iter().map(|a| (*a).to_owned()));
        let tmux = Self { socket };
        tmux.run(
            &[
                "new-session",
                "-d",
                "-x",
                "100",
                "-y",
                "30",
                "-s",
                "overlay",
            ],
            Some(&command),
        );
        tmux
    }

    fn run(&self, args: &[&str], command: Option<&[String]>) -> String {
        let mut tmux = std::process::Command::new("tmux");
        tmux.args(["-L", &self.socket]).args(args);
        if let Some(command) = command {
            tmux.args(command);
        }
        let output = tmux.output().expect("tmux runs (is it installed?)");
        assert!(
            output.status.success() || args[0] == "capture-pane",
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Presses keys (tmux key names: Enter, Down, Space, Escape, BTab...; or text).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "overlay"];
        args.extend(keys);
        self.run(&args, None);
    }

    /// Types text literally.
    fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "overlay", "-l", text], None);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-t", "overlay", "-p"], None)
    }

    /// Waits (at most [`crate::support::WAIT`]) until `done` holds, failing with `what`
    /// and the screen otherwise.
    async fn until(&self, what: &str, mut done: impl FnMut(&str) -> bool) -> String {
        let waited = tokio::time::timeout(crate::support::WAIT, async {
            loop {
                let screen = self.screen();
                if done(&screen) {
                    return screen;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| panic!("{what}; the overlay shows:\n{}", self.screen()))
    }

    /// Waits until the screen shows `text`.
    async fn shows(&self, text: &str) -> String {
        self.until(&format!("never showed {text:?}"), |screen| {
            screen.contains(text)
        })
        .await
    }

    /// Waits until the overlay is subscribed (its "connecting…" line gone): asks from
    /// then on reach it.
    async fn connected(&self) {
        self.until("never connected", |screen| {
            screen.contains("No questions waiting") && !screen.contains("connecting")
        })
        .await;
    }

    /// Waits until the overlay's process has exited (its tmux session is gone).
    async fn exited(&self) {
        let socket = self.socket.clone();
        let running = move || {
            std::process::Command::new("tmux")
                .args(["-L", &socket, "has-session", "-t", "overlay"])
                .status()
                .is_ok_and(|s| s.success())
        };
        self.until("did not exit", |_| !running()).await;
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// `askgate ask` in the background with these question flags; its JSON output and
/// exit code come from `finish`.
fn ask(url: &str, session: &str, flags: &[&str]) -> tokio::process::Child {
    let mut args = vec!["ask", "--addr", url, "--session", session];
    args.extend(flags);
    askgate(&args)
}

async fn answered(child: tokio::process::Child) -> (i32, Value, String) {
    let (code, stdout, stderr) = within("the asking process", finish(child)).await;
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (code, json, stderr)
}

#[tokio::test]
async fn single_select_then_multi_select_with_other_text() {
    let serve = ServeProcess::start().await;
    let tmux = Tmux::answer(&serve.url, &["--session", "demo"]);
    tmux.connected().await;
    let agent = ask(
        &serve.url,
        "demo",
        &[
            "--question",
            "Which database?",
            "--option",
            "Postgres (Recommended)=Relational, already in the stack",
            "--option",
            "SQLite",
        ],
    );
    let screen = tmux.shows("Which database?").await;
    assert!(screen.contains("Postgres  Recommended"), "{screen}");
    assert!(
        screen.contains("Relational, already in the stack"),
        "{screen}"
    );
    tmux.keys(&["Down", "Enter"]);
    tmux.shows("Enter submits the batch").await;
    tmux.keys(&["Enter"]);
    let (code, json, stderr) = answered(agent).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["answers"][0]["selected"][0], "SQLite", "{json}");

    let agent = ask(
        &serve.url,
        "demo",
        &[
            "--question",
            "Which languages?",
            "--multi",
            "--option",
            "Rust",
            "--option",
            "Go",
        ],
    );
    tmux.shows("Which languages?").await;
    tmux.keys(&["Space", "Down", "Space", "o"]);
    tmux.shows("Your answer:").await;
    tmux.type_text("Zig");
    tmux.keys(&["Enter", "Enter"]);
    tmux.shows("Enter submits the batch").await;
    tmux.keys(&["Enter"]);
    let (code, json, stderr) = answered(agent).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        json["answers"][0]["selected"],
        serde_json::json!(["Rust", "Go"]),
        "{json}"
    );
    assert_eq!(json["answers"][0]["custom"], "Zig", "{json}");
    tmux.keys(&["q"]);
    tmux.exited().await;
}

#[tokio::test]
async fn skip_keeps_drafts_and_cancel_sends_the_reason() {
    let serve = ServeProcess::start().await;
    let tmux = Tmux::answer(&serve.url, &["--session", "demo"]);
    tmux.connected().await;
    let two_questions = r#"{"questions":[
        {"id":"deploy","question":"Deploy now?","options":[{"label":"yes"},{"label":"no"}]},
        {"id":"notify","question":"Notify the team?","options":[{"label":"yes"},{"label":"no"}]}]}"#;
    let request = std::env::temp_dir().join(format!("askgate-tui-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&request, two_questions).expect("write the request");
    let agent = ask(
        &serve.url,
        "demo",
        &["--json", request.to_str().expect("utf-8 path")],
    );
    tmux.shows("Deploy now?").await;
    tmux.keys(&["Down", "Enter"]);
    tmux.shows("Notify the team?").await;
    tmux.keys(&["s"]);
    tmux.shows("Enter submits the batch").await;
    tmux.keys(&["Enter"]);
    let (code, json, stderr) = answered(agent).await;
    let _ = std::fs::remove_file(&request);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["answers"][0]["selected"][0], "no", "{json}");
    assert!(
        json["answers"][1]
            .get("selected")
            .is_none_or(|s| s == &serde_json::json!([])),
        "{json}"
    );

    let agent = ask(
        &serve.url,
        "demo",
        &["--question", "Drop the table?", "--option", "yes"],
    );
    tmux.shows("Drop the table?").await;
    tmux.keys(&["c"]);
    tmux.shows("Reason (optional)").await;
    tmux.type_text("use the staging DB");
    tmux.keys(&["Enter"]);
    let (code, _, stderr) = answered(agent).await;
    assert_eq!(code, 3, "ASK_CANCELLED exits 3: {stderr}");
    assert!(
        stderr.contains("use the staging DB"),
        "the reason reaches the agent: {stderr}"
    );
}

#[tokio::test]
async fn a_bot_answering_first_closes_the_overlay_with_a_notice() {
    let serve = ServeProcess::start().await;
    let tmux = Tmux::answer(&serve.url, &["--session", "demo"]);
    tmux.connected().await;
    let agent = ask(
        &serve.url,
        "demo",
        &["--question", "Proceed?", "--option", "go"],
    );
    tmux.shows("Proceed?").await;
    let _bot = askgate(&[
        "bot",
        "--addr",
        &serve.url,
        "--session",
        "demo",
        "--policy",
        "first",
    ]);
    tmux.shows("answered elsewhere by anonymous").await;
    let (code, _, stderr) = answered(agent).await;
    assert_eq!(code, 0, "{stderr}");
}

#[tokio::test]
async fn an_exclusive_overlay_cancels_its_pending_batches_when_it_quits() {
    let serve = ServeProcess::start().await;
    let tmux = Tmux::answer(&serve.url, &["--session", "demo", "--exclusive"]);
    tmux.connected().await;
    let agent = ask(
        &serve.url,
        "demo",
        &["--question", "Proceed?", "--option", "go"],
    );
    tmux.shows("Proceed?").await;
    tmux.keys(&["q"]);
    tmux.exited().await;
    let (code, _, stderr) = answered(agent).await;
    assert_eq!(code, 3, "cancelled on quit: {stderr}");
    assert!(stderr.contains("the answering terminal closed"), "{stderr}");
}

/// However the exclusive overlay ends (Ctrl-C, its terminal hung up, SIGTERM), its
/// pending batches are cancelled, so that their agents learn nobody will answer.
#[tokio::test]
async fn an_exclusive_overlay_cancels_its_pending_batches_however_it_ends() {
    let serve = ServeProcess::start().await;
    for ending in ["C-c", "HUP", "TERM"] {
        let tmux = Tmux::answer(&serve.url, &["--session", "demo", "--exclusive"]);
        tmux.connected().await;
        let agent = ask(
            &serve.url,
            "demo",
            &["--question", "Proceed?", "--option", "go"],
        );
        tmux.shows("Proceed?").await;
        match ending {
            "C-c" => tmux.keys(&["C-c"]),
            signal => {
                let pid = tmux.run(
                    &["display-message", "-p", "-t", "overlay", "#{pane_pid}"],
                    None,
                );
                let status = std::process::Command::new("kill")
                    .args([&format!("-{signal}"), pid.trim()])
                    .status()
                    .expect("kill");
                assert!(status.success(), "kill -{signal} {pid}");
            }
        }
        tmux.exited().await;
        let (code, _, stderr) = answered(agent).await;
        assert_eq!(
            code, 3,
            "{ending}: cancelled when the overlay ended: {stderr}"
        );
        assert!(
            stderr.contains("the answering terminal closed"),
            "{ending}: {stderr}"
        );
        // A program tells it from a person's cancel.
        let report: Value =
            serde_json::from_str(stderr.trim().lines().last().expect("a line")).expect("JSON");
        assert_eq!(
            report["error"]["metadata"]["cancel_source"], "UI_CLOSED",
            "{ending}: {stderr}"
        );
    }
}

/// Reads `out` until `marker` has been read; returns (and takes from `seen`) all up to
/// and including it.
async fn read_through(
    out: &mut tokio::process::ChildStdout,
    seen: &mut String,
    marker: &str,
) -> String {
    use tokio::io::AsyncReadExt;
    within(marker, async {
        loop {
            if let Some(at) = seen.find(marker) {
                return seen.drain(..at + marker.len()).collect();
            }
            let mut chunk = [0u8; 4096];
            let n = out.read(&mut chunk).await.expect("read the prompts");
            assert!(n > 0, "the prompts ended; so far: {seen}");
            seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    })
    .await
}

/// `askgate answer --session demo` (and `extra`) with piped stdin, stdout and stderr:
/// no terminal, so line prompts.
fn piped_answer(url: &str, extra: &[&str]) -> tokio::process::Child {
    let mut args = vec!["answer", "--addr", url, "--session", "demo"];
    args.extend(extra);
    askgate_command(&args)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn askgate answer")
}

/// `askgate answer --session demo` without a terminal (line prompts on piped stdin and
/// stdout), once it follows the session.
struct LinePrompts {
    child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: tokio::process::ChildStdout,
    /// Output read but not consumed yet (see [`read_through`]).
    seen: String,
}

impl LinePrompts {
    async fn start(url: &str, extra: &[&str]) -> Self {
        let mut child = piped_answer(url, extra);
        let input = child.stdin.take().expect("stdin");
        let mut output = child.stdout.take().expect("stdout");
        let mut seen = String::new();
        read_through(&mut output, &mut seen, "following session demo").await;
        Self {
            child,
            input,
            output,
            seen,
        }
    }
}

/// The line prompts with `--exclusive` cancel their pending batches on `q`, Ctrl-C
/// (SIGINT), SIGTERM and SIGHUP alike.
#[tokio::test]
async fn exclusive_line_prompts_cancel_their_pending_batches_however_they_end() {
    use tokio::io::AsyncWriteExt;
    let serve = ServeProcess::start().await;
    for ending in ["q", "INT", "TERM", "HUP"] {
        let LinePrompts {
            child: prompts,
            mut input,
            mut output,
            mut seen,
        } = LinePrompts::start(&serve.url, &["--exclusive"]).await;
        let agent = ask(
            &serve.url,
            "demo",
            &["--question", "Proceed?", "--option", "go"],
        );
        read_through(&mut output, &mut seen, "> ").await;
        match ending {
            "q" => input.write_all(b"q\n").await.expect("write"),
            signal => {
                let pid = prompts.id().expect("running").to_string();
                let status = std::process::Command::new("kill")
                    .args([&format!("-{signal}"), &pid])
                    .status()
                    .expect("kill");
                assert!(status.success(), "kill -{signal} {pid}");
            }
        }
        let (code, _, stderr) = finish(prompts).await;
        assert_eq!(code, 0, "{ending}: {stderr}");
        let (code, _, stderr) = answered(agent).await;
        assert_eq!(
            code, 3,
            "{ending}: cancelled when the prompts ended: {stderr}"
        );
        assert!(
            stderr.contains("the answering terminal closed"),
            "{ending}: {stderr}"
        );
    }
}

/// Without a terminal, `askgate answer` asks with line prompts and takes lines.
#[tokio::test]
async fn without_a_terminal_answer_prompts_line_by_line() {
    use tokio::io::AsyncWriteExt;
    let serve = ServeProcess::start().await;
    let LinePrompts {
        child: prompts,
        mut input,
        mut output,
        mut seen,
    } = LinePrompts::start(&serve.url, &[]).await;
    let agent = ask(
        &serve.url,
        "demo",
        &[
            "--question",
            "Which database?",
            "--option",
            "Postgres",
            "--option",
            "SQLite",
        ],
    );
    let prompt = read_through(&mut output, &mut seen, "> ").await;
    assert!(prompt.contains("Which database?"), "{prompt}");
    assert!(prompt.contains("2) SQLite"), "{prompt}");
    input.write_all(b"7\n").await.expect("write");
    let retry = read_through(&mut output, &mut seen, "> ").await;
    assert!(retry.contains("not an answer here"), "{retry}");
    input.write_all(b"2\n").await.expect("write");
    let (code, json, stderr) = answered(agent).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["answers"][0]["selected"][0], "SQLite", "{json}");
    drop(input);
    let (code, _, stderr) = finish(prompts).await;
    assert_eq!(code, 0, "stdin closed ends the prompts: {stderr}");
}

/// `askgate answer --session demo` without a terminal, its stdin `input` (then closed),
/// until it exits: its exit code, stdout and stderr.
async fn scripted_answer(url: &str, input: &'static [u8]) -> (i32, String, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = piped_answer(url, &[]);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).await.expect("write the answers");
    drop(stdin);
    within("the scripted answer", finish(child)).await
}

/// Waits until `count` asks are pending in session `demo`.
async fn pending_in_demo(url: &str, count: usize) {
    let client = askgate_client::Client::connect(url.to_owned())
        .await
        .expect("connect");
    crate::support::eventually(&format!("{count} asks pending in demo"), || {
        let mut client = client.clone();
        async move {
            let pending = client.list_pending("demo").await.ok()?;
            (pending.len() == count).then_some(())
        }
    })
    .await;
}

/// `printf '2\n' | askgate answer --session demo`: the line is read before the pending
/// batch arrives, waits for it, and answers it.
#[tokio::test]
async fn a_line_written_before_its_question_arrives_answers_it() {
    let serve = ServeProcess::start().await;
    let agent = ask(
        &serve.url,
        "demo",
        &[
            "--question",
            "Which?",
            "--option",
            "a",
            "--option",
            "b",
            "--hold",
        ],
    );
    pending_in_demo(&serve.url, 1).await;
    let (code, _, stderr) = scripted_answer(&serve.url, b"2\n").await;
    assert_eq!(code, 0, "{stderr}");
    let (code, json, stderr) = answered(agent).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["answers"][0]["selected"][0], "b", "{json}");
}

/// Input that ends with batches still unanswered says which on stderr and exits 1;
/// the batches it could answer are answered.
#[tokio::test]
async fn input_that_ends_before_every_batch_is_answered_says_so() {
    let serve = ServeProcess::start().await;
    let flags = ["--question", "Go?", "--option", "yes", "--hold"];
    let first = ask(&serve.url, "demo", &flags);
    pending_in_demo(&serve.url, 1).await;
    let second = ask(&serve.url, "demo", &flags);
    pending_in_demo(&serve.url, 2).await;
    let (code, _, stderr) = scripted_answer(&serve.url, b"1\n").await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("askgate: input ended with 1 batch still unanswered: ask "),
        "{stderr}"
    );
    assert!(stderr.contains("in session demo"), "{stderr}");
    let (code, json, stderr) = answered(first).await;
    assert_eq!(
        (code, &json["answers"][0]["selected"][0]),
        (0, &"yes".into()),
        "{stderr}"
    );
    pending_in_demo(&serve.url, 1).await;
    let mut second = second;
    second.start_kill().expect("kill the second asker");
}
