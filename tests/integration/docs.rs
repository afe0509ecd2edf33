//! The code blocks of README.md and docs/: each one is run by a test (it follows a
//! `<!-- snippet: NAME -->` line, and NAME is what that test looks it up by) or says
//! why it is not (`<!-- not run: WHY -->`: output, a format, a fragment, or what it needs
//! that a test cannot have). The shell snippets named here run as written, in bash,
//! with `askgate` the binary under test.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use crate::support::{ASKGATE, TempDir, finish_within};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A fenced code block: where it starts, its language, the line before it, its text.
struct Block {
    line: usize,
    before: String,
    text: String,
}

fn blocks(page: &str) -> Vec<Block> {
    let lines: Vec<&str> = page.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(fence) = lines[i].strip_prefix("```") {
            let _language = fence;
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].starts_with("```"))
                .unwrap_or(lines.len());
            found.push(Block {
                line: i + 1,
                before: if i > 0 {
                    lines[i - 1].to_owned()
                } else {
                    String::new()
                },
                text: lines[i + 1..end].join("\n") + "\n",
            });
            i = end + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// Every file of the test suites, where a snippet's name must appear for it to count
/// as run.
fn test_sources() -> String {
    let mut text = String::new();
    let dirs = [
        "tests/integration",
        "tests/mcp",
        "tests/a2a",
        "client/python/tests",
        "client/node/test",
        "client/web/test",
    ];
    for dir in dirs {
        let mut pending = vec![root().join(dir)];
        while let Some(path) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if let Ok(source) = std::fs::read_to_string(&path) {
                    text.push_str(&source);
                }
            }
        }
    }
    text
}

#[test]
fn every_code_block_of_the_docs_is_run_or_says_why_not() {
    let sources = test_sources();
    let mut unmarked = Vec::new();
    let mut unrun = Vec::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read the page");
        let shown = page
            .strip_prefix(root())
            .unwrap_or(&page)
            .display()
            .to_string();
        for block in blocks(&text) {
            let at = format!("{shown}:{}", block.line);
            if let Some(name) = block
                .before
                .strip_prefix("<!-- snippet: ")
                .and_then(|rest| rest.strip_suffix(" -->"))
            {
                if let Some(other) = names.insert(name.to_owned(), at.clone()) {
                    panic!("the snippet name {name} is used at {other} and {at}");
                }
                if !sources.contains(&format!("\"{name}\"")) {
                    unrun.push(format!("{at} ({name})"));
                }
            } else if !block.before.starts_with("<!-- not run: ") {
                unmarked.push(at);
            }
        }
    }
    assert!(
        unmarked.is_empty(),
        "code blocks that neither run in a test (`<!-- snippet: NAME -->`) nor say why not \
         (`<!-- not run: WHY -->`): {unmarked:#?}"
    );
    assert!(unrun.is_empty(), "snippets that no test names: {unrun:#?}");
}

/// askgate is not on PyPI: a page that says `pip install askgate…` (or an extra of it,
/// `askgate[receipts]`) would install whatever someone registered under that name.
#[test]
fn no_page_installs_an_askgate_package_from_pypi() {
    let mut pages = pages();
    pages.push(root().join("client/python/README.md"));
    pages.push(root().join("client/python/src/askgate/adapters/__init__.py"));
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("read");
        for (i, line) in text.lines().enumerate() {
            let bad = ["install askgate", "install 'askgate", "install \"askgate"];
            assert!(
                !bad.iter().any(|b| line.contains(b)),
                "{}:{}: {line}",
                page.display(),
                i + 1
            );
        }
    }
}

/// A shell snippet of `page`, by name.
pub(crate) fn snippet(page: &str, name: &str) -> String {
    let text = std::fs::read_to_string(root().join(page)).expect("read the page");
    blocks(&text)
        .into_iter()
        .find(|b| b.before == format!("<!-- snippet: {name} -->"))
        .unwrap_or_else(|| panic!("{page} has no snippet {name}"))
        .text
}

/// What a shell snippet's run left: its exit code, stdout, stderr and directory.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    dir: TempDir,
}

/// Runs a shell snippet as written in a fresh directory, with `askgate` the binary
/// under test: `askgate serve` starts in the background on a free port (its address
/// exported as ASKGATE_ADDR, as the next commands expect it; the memory engine unless
/// the snippet says otherwise) and is stopped at the end; `askgate watch`, which
/// follows until interrupted, is interrupted after a second.
async fn run_sh(code: &str) -> Ran {
    let dir = TempDir::new();
    let prelude = r#"
set -euo pipefail
askgate() {
  case "$1" in
    serve)
      local log addr=""
      log=$(mktemp -p "$PWD" serve.XXXXXX)
      "$ASKGATE_BIN" "$@" 2>"$log" &
      echo $! >>"$PWD/.serve-pids"
      for _ in $(seq 400); do
        addr=$(sed -n 's/.*local_addr=\([0-9.:]*\).*/\1/p' "$log" | head -n1)
        [ -n "$addr" ] && break
        kill -0 "$(tail -n1 "$PWD/.serve-pids")" 2>/dev/null || break
        sleep 0.025
      done
      [ -n "$addr" ] || { echo "askgate serve did not start:" >&2; cat "$log" >&2; return 1; }
      grep -i 'warn' "$log" >&2 || true
      export ASKGATE_ADDR="http://$addr"
      ;;
    watch) timeout 1 "$ASKGATE_BIN" "$@" || [ $? = 124 ] ;;
    *) "$ASKGATE_BIN" "$@" ;;
  esac
}
cleanup() { [ -f "$PWD/.serve-pids" ] && kill $(cat "$PWD/.serve-pids") 2>/dev/null; true; }
trap cleanup EXIT
"#;
    let script = format!("{prelude}\n{code}");
    let child = tokio::process::Command::new("bash")
        .args(["-c", &script])
        .current_dir(&dir.0)
        .env("ASKGATE_BIN", ASKGATE)
        .env("ASKGATE_LISTEN", "127.0.0.1:0")
        .env("ASKGATE_BACKEND", "memory")
        .env("ASKGATE_LOG", "info")
        .env_remove("ASKGATE_ADDR")
        .env_remove("ASKGATE_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bash");
    let (code, stdout, stderr) = finish_within(std::time::Duration::from_secs(60), child).await;
    Ran {
        code,
        stdout,
        stderr,
        dir,
    }
}

/// The mode bits of a file the snippet made.
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn the_jwt_recipe_makes_a_private_secret_and_a_working_token() {
    let ran = run_sh(&snippet("docs/operations.md", "jwt-recipe")).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        mode(&ran.dir.0.join("jwt.secret")),
        0o600,
        "readable by its owner alone"
    );
    assert!(
        !ran.stderr.to_lowercase().contains("warn"),
        "neither the server nor `askgate token` warns: {}",
        ran.stderr
    );
    assert!(
        ran.stdout.contains(r#""synced""#),
        "the token was accepted: {}",
        ran.stdout
    );
}

#[tokio::test]
async fn the_secret_key_recipe_makes_a_key_the_server_takes() {
    let ran = run_sh(&snippet("docs/operations.md", "secret-key-recipe")).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(mode(&ran.dir.0.join("askgate-secret.key")), 0o600);
    assert!(
        !ran.stderr.to_lowercase().contains("warn"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn the_api_keys_recipe_runs_as_written() {
    let ran = run_sh(&snippet("docs/operations.md", "keys-recipe")).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(mode(&ran.dir.0.join("ui.key")), 0o600);
    assert!(ran.stdout.contains(r#""synced""#), "{}", ran.stdout);
}

#[tokio::test]
async fn the_protocols_command_line_examples_run_as_written() {
    // On a running server (the snippet's page assumes one).
    let code = format!(
        "askgate serve\n{}",
        snippet("docs/protocol.md", "no-provider")
    );
    let ran = run_sh(&code).await;
    assert_eq!(ran.code, 7, "exit 7, as the comment says: {}", ran.stderr);
    assert!(ran.stderr.contains("NO_PROVIDER"), "{}", ran.stderr);
}
