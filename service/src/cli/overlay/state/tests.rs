use askgate_proto::v1::{Intent, PlanReview};

use super::*;

use crate::cli::overlay::test_question as question;

fn overlay(questions: Vec<Question>) -> Overlay {
    Overlay::new(Requested {
        rpc_id: "r".into(),
        session_id: "s".into(),
        questions,
        ..Default::default()
    })
}

fn keys(overlay: &mut Overlay, keys: &[Key]) -> Action {
    let mut last = Action::None;
    for key in keys {
        last = overlay.on_key(*key);
    }
    last
}

fn typed(text: &str) -> Vec<Key> {
    text.chars().map(Key::Char).collect()
}

fn answer(id: &str, selected: &[&str], custom: Option<&str>) -> QuestionAnswer {
    QuestionAnswer {
        id: id.into(),
        selected: selected.iter().map(|s| (*s).into()).collect(),
        custom: custom.map(Into::into),
    }
}

#[test]
fn single_select_enter_chooses_and_advances_then_enter_submits() {
    let mut o = overlay(vec![
        question("db", &["Postgres", "SQLite"], false),
        question("env", &["prod", "staging"], false),
    ]);
    assert_eq!(keys(&mut o, &[Key::Down, Key::Enter]), Action::None);
    assert_eq!(o.item, 1, "advanced to the next question");
    assert_eq!(o.cursor, 0);
    keys(&mut o, &[Key::Char('j'), Key::Char('k'), Key::Enter]);
    assert_eq!(o.mode, Mode::Review);
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![
            answer("db", &["SQLite"], None),
            answer("env", &["prod"], None)
        ])
    );
}

#[test]
fn the_cursor_stays_within_the_options() {
    let mut o = overlay(vec![question("q", &["a", "b"], false)]);
    keys(&mut o, &[Key::Up, Key::Up]);
    assert_eq!(o.cursor, 0);
    keys(&mut o, &[Key::Down, Key::Down, Key::Down]);
    assert_eq!(o.cursor, 1);
}

#[test]
fn multi_select_space_toggles_never_twice_and_enter_confirms() {
    let mut o = overlay(vec![question("langs", &["Rust", "Go", "Zig"], true)]);
    keys(&mut o, &[Key::Char(' '), Key::Down, Key::Char(' ')]);
    assert_eq!(o.drafts[0].selected, ["Rust", "Go"]);
    // Toggling Go off and on again leaves it there once.
    keys(&mut o, &[Key::Char(' '), Key::Char(' ')]);
    assert_eq!(o.drafts[0].selected, ["Rust", "Go"]);
    keys(&mut o, &[Key::Up, Key::Char(' ')]);
    assert_eq!(
        o.drafts[0].selected,
        ["Go"],
        "Space on a chosen label removes it"
    );
    assert_eq!(o.mode, Mode::Choosing, "Space does not confirm");
    o.on_key(Key::Enter);
    assert_eq!(o.mode, Mode::Review);
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![answer("langs", &["Go"], None)])
    );
}

#[test]
fn multi_select_enter_with_nothing_chosen_only_hints() {
    let mut o = overlay(vec![question("langs", &["Rust", "Go"], true)]);
    assert_eq!(o.on_key(Key::Enter), Action::None);
    assert_eq!(o.drafts[0].status, Status::Open);
    assert!(o.hint.is_some());
}

#[test]
fn space_does_not_choose_in_a_single_select() {
    let mut o = overlay(vec![question("q", &["a", "b"], false)]);
    o.on_key(Key::Char(' '));
    assert!(o.drafts[0].selected.is_empty());
    assert_eq!(o.drafts[0].status, Status::Open);
}

#[test]
fn other_text_overrides_a_single_select_choice() {
    let mut o = overlay(vec![question("db", &["Postgres", "SQLite"], false)]);
    o.on_key(Key::Enter);
    assert_eq!(o.mode, Mode::Review);
    keys(&mut o, &[Key::Left, Key::Char('o')]);
    assert_eq!(o.mode, Mode::Typing(String::new()));
    keys(&mut o, &typed(" DuckDB "));
    o.on_key(Key::Enter);
    assert_eq!(o.drafts[0].selected, Vec::<String>::new());
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![answer("db", &[], Some("DuckDB"))])
    );
}

#[test]
fn other_text_adds_to_multi_select_choices() {
    let mut o = overlay(vec![question("langs", &["Rust", "Go"], true)]);
    keys(&mut o, &[Key::Char(' '), Key::Char('o')]);
    keys(&mut o, &typed("OCaml"));
    o.on_key(Key::Enter);
    assert_eq!(
        o.mode,
        Mode::Choosing,
        "the item is still confirmed with Enter"
    );
    o.on_key(Key::Enter);
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![answer("langs", &["Rust"], Some("OCaml"))])
    );
}

#[test]
fn an_optionless_question_goes_straight_to_text_input() {
    let mut o = overlay(vec![
        question("a", &["x"], false),
        question("why", &[], false),
    ]);
    o.on_key(Key::Enter);
    assert_eq!(o.item, 1);
    assert_eq!(o.mode, Mode::Typing(String::new()));
    keys(&mut o, &typed("because"));
    keys(&mut o, &[Key::Backspace, Key::Char('e')]);
    o.on_key(Key::Enter);
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![
            answer("a", &["x"], None),
            answer("why", &[], Some("because"))
        ])
    );
}

#[test]
fn an_emptied_other_text_keeps_the_choice_made_before() {
    let mut o = overlay(vec![question("db", &["Postgres", "SQLite"], false)]);
    keys(
        &mut o,
        &[Key::Down, Key::Enter, Key::Left, Key::Char('o'), Key::Enter],
    );
    assert_eq!(o.drafts[0].selected, ["SQLite"]);
    assert_eq!(o.drafts[0].status, Status::Answered);
    assert_eq!(
        keys(&mut o, &[Key::Right, Key::Enter]),
        Action::Submit(vec![answer("db", &["SQLite"], None)])
    );
}

#[test]
fn an_empty_text_answers_nothing() {
    let mut o = overlay(vec![question("why", &[], false)]);
    keys(&mut o, &typed("   "));
    o.on_key(Key::Enter);
    assert_eq!(o.drafts[0].status, Status::Open);
    assert!(o.hint.is_some());
    assert_ne!(o.mode, Mode::Review);
}

#[test]
fn skip_keeps_earlier_drafts_and_submit_waits_until_every_item_is_done() {
    let mut o = overlay(vec![
        question("a", &["x", "y"], false),
        question("b", &["p", "q"], true),
        question("c", &["m"], false),
    ]);
    keys(&mut o, &[Key::Down, Key::Enter]); // a = y
    keys(&mut o, &[Key::Char(' ')]); // b: p chosen, not confirmed
    keys(&mut o, &[Key::Right]); // on to c without confirming b
    assert_eq!(o.item, 2);
    o.on_key(Key::Char('s')); // skip c
    assert_eq!(o.drafts[0].selected, ["y"], "the earlier draft stays");
    assert_eq!(o.item, 1, "back to the item still open");
    assert_eq!(o.drafts[1].selected, ["p"], "its draft kept");
    assert_ne!(o.mode, Mode::Review);
    o.on_key(Key::Enter); // confirm b
    assert_eq!(o.mode, Mode::Review);
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![
            answer("a", &["y"], None),
            answer("b", &["p"], None),
            answer("c", &[], None),
        ])
    );
}

#[test]
fn going_back_keeps_the_draft_and_puts_the_cursor_on_it() {
    let mut o = overlay(vec![
        question("a", &["x", "y", "z"], false),
        question("b", &["p"], false),
    ]);
    keys(&mut o, &[Key::Down, Key::Down, Key::Enter]);
    assert_eq!(o.item, 1);
    o.on_key(Key::BackTab);
    assert_eq!((o.item, o.cursor), (0, 2));
    assert_eq!(o.drafts[0].selected, ["z"]);
    assert_eq!(o.drafts[0].status, Status::Answered);
}

#[test]
fn a_skipped_item_answered_later_counts_as_answered() {
    let mut o = overlay(vec![question("a", &["x"], false)]);
    o.on_key(Key::Char('s'));
    assert_eq!(o.mode, Mode::Review);
    keys(&mut o, &[Key::Left, Key::Enter]);
    assert_eq!(
        o.on_key(Key::Enter),
        Action::Submit(vec![answer("a", &["x"], None)])
    );
}

#[test]
fn cancel_asks_for_an_optional_reason() {
    let mut o = overlay(vec![question("a", &["x"], false)]);
    o.on_key(Key::Char('c'));
    assert_eq!(o.mode, Mode::CancelReason(String::new()));
    keys(&mut o, &typed("not now "));
    assert_eq!(o.on_key(Key::Enter), Action::Cancel("not now".into()));

    let mut o = overlay(vec![question("a", &["x"], false)]);
    keys(&mut o, &[Key::Char('c')]);
    assert_eq!(o.on_key(Key::Enter), Action::Cancel(String::new()));

    let mut o = overlay(vec![question("a", &["x"], false)]);
    keys(&mut o, &[Key::Char('c'), Key::Char('n'), Key::Esc]);
    assert_eq!(o.mode, Mode::Choosing, "Esc goes back to the question");
}

#[test]
fn help_shows_over_the_mode_and_any_key_closes_it() {
    let mut o = overlay(vec![question("a", &["x", "y"], false)]);
    o.on_key(Key::Char('?'));
    assert_eq!(o.mode, Mode::Help(Box::new(Mode::Choosing)));
    assert_eq!(
        o.on_key(Key::Enter),
        Action::None,
        "the key only closes help"
    );
    assert_eq!(o.mode, Mode::Choosing);
    assert_eq!(o.drafts[0].status, Status::Open);
}

#[test]
fn quit_leaves_the_batch_alone() {
    let mut o = overlay(vec![question("a", &["x"], false)]);
    assert_eq!(o.on_key(Key::Char('q')), Action::Quit);
}

#[test]
fn a_recommended_option_is_never_preselected() {
    let mut o = overlay(vec![question("a", &["x", "y (Recommended)"], false)]);
    assert_eq!(o.cursor, 0);
    assert!(o.drafts[0].selected.is_empty());
    assert_eq!(o.on_key(Key::Enter), Action::None);
    assert_eq!(o.drafts[0].selected, ["x"]);
}

#[test]
fn plan_review_names_its_approve_option_and_detail_scrolls() {
    let mut q = question("plan", &["Approve", "Revise"], false);
    q.detail = Some("1. migrate\n2. deploy".into());
    q.intent = Some(Intent {
        kind: Some(intent::Kind::PlanReview(PlanReview {
            approve: "Approve".into(),
        })),
    });
    assert_eq!(Overlay::plan_approve(&q), Some("Approve"));
    let mut o = overlay(vec![q]);
    keys(&mut o, &[Key::PageDown, Key::PageDown, Key::PageUp]);
    assert_eq!(o.detail_scroll, 5);
}

/// The answering rules shared with the web console's composer
/// (tests/composer/vectors.json, which node --test runs there too), each human
/// intent performed with this overlay's keys.
mod shared_vectors {
    use serde_json::{Value, json};

    use super::*;

    const VECTORS: &str = include_str!("../../../../../tests/composer/vectors.json");

    fn question_of(q: &Value) -> Question {
        let labels: Vec<&str> = q["options"]
            .as_array()
            .map(|o| o.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut built = question(
            q["id"].as_str().expect("an id"),
            &labels,
            q["multi_select"].as_bool().unwrap_or(false),
        );
        built.question = q["question"].as_str().unwrap_or_default().to_owned();
        built
    }

    /// Out of text input (an optionless question opens in it).
    fn choosing(o: &mut Overlay) {
        if matches!(o.mode, Mode::Typing(_)) {
            o.on_key(Key::Esc);
        }
    }

    fn cursor_to(o: &mut Overlay, label: &str) {
        let options = &o.question().expect("a question").options;
        let at = options
            .iter()
            .position(|opt| opt.label == label)
            .unwrap_or_else(|| panic!("no option {label:?}"));
        for _ in 0..options.len() {
            o.on_key(Key::Up);
        }
        for _ in 0..at {
            o.on_key(Key::Down);
        }
    }

    /// Types `text` as the question's own words and presses Enter.
    fn own_words(o: &mut Overlay, text: &str) {
        if !matches!(o.mode, Mode::Typing(_)) {
            o.on_key(Key::Char('o'));
        }
        let Mode::Typing(before) = &o.mode else {
            panic!("not typing: {:?}", o.mode);
        };
        for _ in 0..before.chars().count() {
            o.on_key(Key::Backspace);
        }
        for c in text.chars() {
            o.on_key(Key::Char(c));
        }
        o.on_key(Key::Enter);
    }

    fn go(o: &mut Overlay, item: usize) {
        choosing(o);
        if o.mode == Mode::Review {
            o.on_key(Key::Left);
        }
        while o.item > item {
            choosing(o);
            o.on_key(Key::Left);
        }
        while o.item < item {
            choosing(o);
            o.on_key(Key::Right);
        }
    }

    fn step(o: &mut Overlay, step: &Value) {
        let multi = o.question().is_some_and(|q| q.multi_select);
        if let Some(labels) = step["answer"].as_array() {
            choosing(o);
            if multi {
                for label in labels {
                    cursor_to(o, label.as_str().expect("a label"));
                    o.on_key(Key::Char(' '));
                }
                if let Some(text) = step["other"].as_str() {
                    own_words(o, text);
                }
                o.on_key(Key::Enter);
            } else {
                cursor_to(o, labels[0].as_str().expect("a label"));
                o.on_key(Key::Enter);
            }
        } else if let Some(text) = step["other"].as_str() {
            own_words(o, text);
        } else if let Some(label) = step["toggle"].as_str() {
            choosing(o);
            cursor_to(o, label);
            o.on_key(Key::Char(' '));
        } else if step["confirm"] == json!(true) {
            choosing(o);
            o.on_key(Key::Enter);
        } else if step["skip"] == json!(true) {
            choosing(o);
            o.on_key(Key::Char('s'));
        } else if let Some(item) = step["go"].as_u64() {
            go(o, item as usize);
        } else {
            panic!("a step this overlay does not know: {step}");
        }
    }

    fn answers_json(o: &Overlay) -> Value {
        Value::Array(
            o.answers()
                .iter()
                .map(|a| match &a.custom {
                    Some(custom) => {
                        json!({"id": a.id, "selected": a.selected, "custom": custom})
                    }
                    None => json!({"id": a.id, "selected": a.selected}),
                })
                .collect(),
        )
    }

    #[test]
    fn the_shared_answering_rules_hold() {
        let file: Value = serde_json::from_str(VECTORS).expect("vectors.json");
        for vector in file["vectors"].as_array().expect("vectors") {
            let name = vector["name"].as_str().expect("a name");
            let questions = vector["questions"].as_array().expect("questions");
            let mut o = overlay(questions.iter().map(question_of).collect());
            for s in vector["steps"].as_array().expect("steps") {
                step(&mut o, s);
            }
            let expect = &vector["expect"];
            for key in expect.as_object().expect("expect").keys() {
                match key.as_str() {
                    "phase" => {
                        let phase = if o.mode == Mode::Review {
                            "review"
                        } else {
                            "question"
                        };
                        assert_eq!(phase, expect["phase"], "{name}: phase");
                    }
                    "item" => assert_eq!(json!(o.item), expect["item"], "{name}: item"),
                    "statuses" => {
                        let statuses: Vec<&str> = o
                            .drafts
                            .iter()
                            .map(|d| match d.status {
                                Status::Open => "open",
                                Status::Answered => "answered",
                                Status::Skipped => "skipped",
                            })
                            .collect();
                        assert_eq!(json!(statuses), expect["statuses"], "{name}: statuses");
                    }
                    "answers" => {
                        assert_eq!(answers_json(&o), expect["answers"], "{name}: answers")
                    }
                    other => {
                        panic!("{name}: an expectation this overlay does not know: {other}")
                    }
                }
            }
        }
    }
}

#[test]
fn the_question_that_approves_an_action_takes_its_options_only() {
    let mut o = Overlay::new(Requested {
        rpc_id: "r".into(),
        session_id: "s".into(),
        questions: vec![
            question("go", &["Approve", "Reject"], false),
            question("why", &["ops", "dev"], false),
        ],
        action: Some(Box::new(askgate_proto::v1::Action {
            name: "deploy".into(),
            arguments_json: "{}".into(),
            approving_answers: vec![answer("go", &["Approve"], None)],
        })),
        ..Default::default()
    });
    assert!(o.approving());
    for key in ['o', 's'] {
        keys(&mut o, &[Key::Char(key)]);
        assert_eq!(o.mode, Mode::Choosing, "{key}");
        assert_eq!(o.item, 0, "{key}: not skipped");
        assert_eq!(o.hint, Some(Hint::ChooseToApprove), "{key}");
    }
    // Its options answer it; the other question still takes own words and skips.
    keys(&mut o, &[Key::Enter]);
    assert_eq!(o.item, 1);
    assert!(!o.approving());
    keys(&mut o, &[Key::Char('s')]);
    assert_eq!(o.mode, Mode::Review);
}
