use askgate_client::Event;
use askgate_proto::v1::{
    Intent, PlanReview, QuestionOption, Requested, Resolution, Resolved, intent,
};
use ratatui::{Terminal, backend::TestBackend};

use super::*;
use crate::cli::overlay::state::Key;

fn option(label: &str, description: Option<&str>) -> QuestionOption {
    QuestionOption {
        label: label.into(),
        description: description.map(Into::into),
    }
}

fn ask(rpc_id: &str, questions: Vec<Question>) -> Event {
    Event::Requested {
        cursor: String::new(),
        requested: Requested {
            rpc_id: rpc_id.into(),
            session_id: "demo".into(),
            questions,
            ..Default::default()
        },
    }
}

fn db_question() -> Question {
    Question {
        id: "db".into(),
        question: "Which database?".into(),
        header: Some("Database".into()),
        options: vec![
            option(
                "Postgres (Recommended)",
                Some("Relational, already in the stack"),
            ),
            option("SQLite", None),
        ],
        ..Default::default()
    }
}

/// The screen as text, one line per row.
fn screen(queue: &Queue, connection: Option<&str>) -> String {
    let context = Context {
        scope: "session demo",
        all_sessions: false,
        connection,
    };
    screen_in(queue, &context)
}

fn screen_in(queue: &Queue, context: &Context) -> String {
    let mut terminal = Terminal::new(TestBackend::new(100, 24)).expect("terminal");
    terminal
        .draw(|frame| draw(frame, queue, context))
        .expect("draw");
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_shows(screen: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            screen.contains(part),
            "no {part:?} on the screen:\n{screen}"
        );
    }
}

#[test]
fn the_guide_key_table_lists_every_key() {
    let guide = include_str!("../../../../../docs/cli.md");
    for (key, _) in KEYS {
        assert!(
            guide.contains(&format!("| {key} |")),
            "docs/cli.md lacks the key {key:?}"
        );
    }
}

#[test]
fn a_single_select_with_descriptions_and_a_recommendation_badge() {
    let mut queue = Queue::new();
    queue.on_event(ask("r1", vec![db_question()]));
    let shown = screen(&queue, None);
    assert_shows(
        &shown,
        &[
            "askgate",
            "session demo",
            "Question 1 of 1",
            "Database",
            "Which database?",
            "› ( ) Postgres  Recommended",
            "Relational, already in the stack",
            "( ) SQLite",
            "Enter choose",
        ],
    );
    assert!(!shown.contains("(•)"), "nothing preselected:\n{shown}");
}

#[test]
fn the_box_is_padded_alike_and_sized_to_its_batch() {
    let plain = Question {
        id: "q".into(),
        question: "Proceed?".into(),
        options: vec![option("yes", None), option("no", None)],
        ..Default::default()
    };
    for question in [db_question(), plain] {
        let mut queue = Queue::new();
        queue.on_event(ask("r1", vec![question]));
        let shown = screen(&queue, None);
        let rows: Vec<&str> = shown.lines().collect();
        // Inside the borders every line keeps a blank column on the left, headed
        // question or not.
        for row in rows.iter().filter(|r| r.starts_with('│')) {
            let inside = row.trim_start_matches('│');
            assert!(
                inside.is_empty() || inside.starts_with(' '),
                "touches the border: {row:?}\n{shown}"
            );
        }
        // The box ends where its batch does, and the keys follow it.
        let bottom = rows
            .iter()
            .position(|r| r.starts_with('└'))
            .expect("the box's bottom");
        assert!(bottom < 15, "the box fills the screen:\n{shown}");
        assert!(
            rows[bottom + 2].contains("q quit"),
            "the keys follow the box:\n{shown}"
        );
    }
}

#[test]
fn following_every_session_names_the_batch_s_session() {
    let mut queue = Queue::new();
    queue.on_event(ask("r1", vec![db_question()]));
    let context = Context {
        scope: "all sessions",
        all_sessions: true,
        connection: None,
    };
    assert_shows(
        &screen_in(&queue, &context),
        &["all sessions · session demo · ask r1"],
    );
}

#[test]
fn a_multi_select_shows_its_choices_and_keys() {
    let mut queue = Queue::new();
    let question = Question {
        id: "langs".into(),
        question: "Which languages?".into(),
        options: vec![option("Rust", None), option("Go", None)],
        multi_select: true,
        ..Default::default()
    };
    queue.on_event(ask("r1", vec![question]));
    queue.on_key(Key::Char(' '));
    assert_shows(
        &screen(&queue, None),
        &["[x] Rust", "[ ] Go", "Space toggle"],
    );
}

#[test]
fn typing_a_free_text_answer() {
    let mut queue = Queue::new();
    queue.on_event(ask("r1", vec![db_question()]));
    for key in [
        Key::Char('o'),
        Key::Char('D'),
        Key::Char('u'),
        Key::Char('c'),
        Key::Char('k'),
    ] {
        queue.on_key(key);
    }
    assert_shows(&screen(&queue, None), &["Your answer: Duck▏", "Enter save"]);
}

#[test]
fn a_secret_answer_is_masked_while_typed_and_after() {
    let code = Question {
        id: "code".into(),
        question: "The one-time code?".into(),
        secret: true,
        ..Default::default()
    };
    let mut queue = Queue::new();
    queue.on_event(ask("r1", vec![code, db_question()]));
    for key in [
        Key::Char('o'),
        Key::Char('4'),
        Key::Char('7'),
        Key::Char('1'),
    ] {
        queue.on_key(key);
    }
    let typing = screen(&queue, None);
    assert_shows(&typing, &["only the asking agent gets it", "•••▏"]);
    assert!(!typing.contains("471"), "{typing}");
    queue.on_key(Key::Enter);
    queue.on_key(Key::Left);
    let kept = screen(&queue, None);
    assert_shows(&kept, &["•••"]);
    assert!(!kept.contains("471"), "{kept}");
}

#[test]
fn a_plan_review_shows_the_plan_and_marks_the_approve_option() {
    let mut queue = Queue::new();
    let question = Question {
        id: "plan".into(),
        question: "Go ahead with this plan?".into(),
        detail: Some("1. Add the column\n2. Backfill\n3. Switch reads".into()),
        options: vec![option("Approve", None), option("Revise", None)],
        intent: Some(Intent {
            kind: Some(intent::Kind::PlanReview(PlanReview {
                approve: "Approve".into(),
            })),
        }),
        ..Default::default()
    };
    queue.on_event(ask("r1", vec![question]));
    assert_shows(
        &screen(&queue, None),
        &[
            "The plan to review",
            "1. Add the column",
            "3. Switch reads",
            "Approve  approves the plan",
        ],
    );
}

#[test]
fn the_queue_counter_and_progress_over_the_questions() {
    let mut queue = Queue::new();
    let second = Question {
        id: "why".into(),
        question: "Why?".into(),
        ..Default::default()
    };
    queue.on_event(ask("r1", vec![db_question(), second]));
    queue.on_event(ask("r2", vec![db_question()]));
    queue.on_event(ask("r3", vec![db_question()]));
    queue.on_key(Key::Enter);
    assert_shows(
        &screen(&queue, None),
        &[
            "+2 waiting",
            "Question 2 of 2 ✓ ·",
            "(a free-text question)",
            "Your answer: ▏",
        ],
    );
}

#[test]
fn a_batch_resolved_elsewhere_leaves_a_notice() {
    let mut queue = Queue::new();
    queue.on_event(ask("r1", vec![db_question()]));
    queue.on_event(Event::Resolved {
        cursor: String::new(),
        resolved: Resolved {
            rpc_id: "r1".into(),
            reason: Resolution::Answered.into(),
            resolved_by: "alice".into(),
            ..Default::default()
        },
    });
    assert_shows(
        &screen(&queue, None),
        &[
            "No questions waiting on session demo",
            "answered elsewhere by alice",
        ],
    );
}

#[test]
fn review_cancel_reason_help_and_a_lost_connection() {
    let mut queue = Queue::new();
    queue.on_event(ask("r1", vec![db_question()]));
    queue.on_key(Key::Enter);
    assert_shows(
        &screen(&queue, None),
        &["Enter submits the batch", "Enter submit"],
    );
    queue.on_key(Key::Char('c'));
    queue.on_key(Key::Char('x'));
    assert_shows(&screen(&queue, None), &["Reason (optional): x▏"]);
    queue.on_key(Key::Esc);
    queue.on_key(Key::Char('?'));
    assert_shows(&screen(&queue, None), &["Keys", "cancel the whole batch"]);
    assert_shows(
        &screen(&queue, Some("connection lost; reconnecting…")),
        &["connection lost; reconnecting…"],
    );
}

#[test]
fn what_an_answer_approves_is_shown_with_the_question() {
    let mut queue = Queue::new();
    queue.on_event(Event::Requested {
        cursor: String::new(),
        requested: Requested {
            rpc_id: "r1".into(),
            session_id: "demo".into(),
            questions: vec![db_question()],
            action: Some(Box::new(askgate_proto::v1::Action {
                name: "deploy".into(),
                arguments_json: r#"{"env":"prod"}"#.into(),
                ..Default::default()
            })),
            quorum: Some(askgate_proto::v1::Quorum { count: 2 }),
            ..Default::default()
        },
    });
    let shown = screen(&queue, None);
    assert_shows(
        &shown,
        &[
            "What the answer approves",
            "Approves deploy:",
            "\"env\": \"prod\"",
            "Needs 2 approvers who give the same answers.",
        ],
    );
}

#[test]
fn an_approval_says_who_asked_what_its_digest_binds_and_when_its_default_applies() {
    let mut queue = Queue::new();
    queue.on_event(Event::Requested {
        cursor: String::new(),
        requested: Requested {
            rpc_id: "r1".into(),
            session_id: "demo".into(),
            questions: vec![db_question()],
            action: Some(Box::new(askgate_proto::v1::Action {
                name: "deploy".into(),
                arguments_json: r#"{"env":"prod"}"#.into(),
                ..Default::default()
            })),
            action_digest: "0123456789abcdef".repeat(4),
            asked_by: "worker-7".into(),
            default_answers: vec![askgate_client::answer::select("db", ["SQLite"])],
            expires_at: Some(
                (std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_392_800)).into(),
            ),
            ..Default::default()
        },
    });
    let shown = screen(&queue, None);
    assert_shows(
        &shown,
        &[
            "Asked by worker-7.",
            "Digest 0123456789ab…: the signed receipt binds",
            "If nobody answers by 2026-12-04 14:00 UTC: SQLite.",
        ],
    );
    assert!(!shown.contains("This ask if"), "{shown}");
}

#[test]
fn an_ask_only_the_console_may_answer_says_so_before_it_is_filled_in() {
    let mut queue = Queue::new();
    queue.on_event(Event::Requested {
        cursor: String::new(),
        requested: Requested {
            rpc_id: "r1".into(),
            session_id: "demo".into(),
            questions: vec![db_question()],
            allowed_channels: vec!["console".into()],
            ..Default::default()
        },
    });
    let shown = screen(&queue, None);
    assert_shows(
        &shown,
        &["Only console may answer this ask, not this terminal: answer it there."],
    );
}
