use askgate_proto::v1::{
    Action, Intent, PlanReview, Question, QuestionOption, Quorum, intent::Kind,
};

use super::*;

fn question(id: &str, options: usize, multi: bool, text: &str) -> Question {
    Question {
        id: id.into(),
        question: text.into(),
        options: (0..options)
            .map(|i| QuestionOption {
                label: format!("<b>option</b> & {i} {}", "x".repeat(i % 7 * 30)),
                description: Some(format!("why {i} \"quoted\" <i>")),
            })
            .collect(),
        multi_select: multi,
        ..Default::default()
    }
}

fn ask(questions: Vec<Question>) -> Requested {
    Requested {
        rpc_id: "r".repeat(128),
        session_id: "ops/deploy".into(),
        questions,
        ..Default::default()
    }
}

/// The text Telegram shows once it parses `html`: tags dropped, entities read.
fn parsed(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('<') {
            let end = rest.find('>').expect("a closed tag");
            rest = &rest[end + 1..];
        } else {
            let end = rest.find(';').expect("a closed entity");
            out.push(match &rest[..=end] {
                "&amp;" => '&',
                "&lt;" => '<',
                "&gt;" => '>',
                "&quot;" => '"',
                other => panic!("an entity Telegram does not know: {other}"),
            });
            rest = &rest[end + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Fails unless `message` keeps to the Bot API's limits.
fn assert_within_limits(message: &Value) {
    let text = message["text"].as_str().expect("text");
    let shown = parsed(text);
    assert!(!shown.trim().is_empty());
    assert!(units(&shown) <= MAX_MESSAGE, "{} characters", units(&shown));
    let rows = message["reply_markup"]["inline_keyboard"].as_array();
    let buttons: Vec<&Value> = rows
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .collect();
    assert!(buttons.len() <= 100, "{} buttons", buttons.len());
    for row in rows.into_iter().flatten() {
        assert!(row.as_array().expect("a row").len() <= 8);
    }
    for button in buttons {
        assert!(!button["text"].as_str().expect("text").trim().is_empty());
        if let Some(data) = button["callback_data"].as_str() {
            assert!((1..=64).contains(&data.len()), "{data}");
            assert!(Data::decode(data).is_some(), "{data}");
        }
    }
}

#[test]
fn every_shape_of_ask_keeps_to_telegrams_limits() {
    let long = "é𝄞<&>\"".repeat(2000);
    let mut shapes = vec![];
    for options in [0, 2, 10, 20, 21, 100] {
        for multi in [false, true] {
            shapes.push(ask(vec![question("q", options, multi, "Which one?")]));
            shapes.push(ask(vec![question("q", options, multi, &long)]));
        }
    }
    shapes.push(ask((0..20)
        .map(|i| question(&format!("q{i}"), i % 5 * 3, i % 2 == 0, &long))
        .collect()));
    let mut review = question("plan", 2, false, "Ship this plan?");
    review.detail = Some(long.clone());
    review.options[0].label = "Approve".into();
    review.intent = Some(Intent {
        kind: Some(Kind::PlanReview(PlanReview {
            approve: "Approve".into(),
        })),
    });
    let mut gated = ask(vec![review]);
    gated.action = Some(Box::new(Action {
        name: "deploy <prod>".into(),
        arguments_json: format!("{{\"cmd\": {:?}}}", long),
        ..Default::default()
    }));
    gated.quorum = Some(Quorum { count: 2 });
    shapes.push(gated);
    let key = ask_key("t", "s", "r");
    for requested in &shapes {
        for (answerable, cancellable) in [(true, true), (false, true), (false, false)] {
            let console = Some("https://askgate.example.com/console/#/inbox");
            let message = question_message(&key, requested, answerable, cancellable, console);
            assert_within_limits(&message);
        }
        let resolved = Resolved {
            reason: Resolution::Cancelled.into(),
            cancel_reason: long.clone(),
            resolved_by: "telegram:42".into(),
            answers: requested
                .questions
                .iter()
                .map(|q| QuestionAnswer {
                    id: q.id.clone(),
                    selected: q.options.iter().map(|o| o.label.clone()).collect(),
                    custom: Some(long.clone()),
                })
                .collect(),
            ..Default::default()
        };
        assert_within_limits(&resolved_message(requested, &resolved));
        let answered = Resolved {
            reason: Resolution::Answered.into(),
            ..resolved
        };
        assert_within_limits(&resolved_message(requested, &answered));
        for prompted in [Prompted::Answer, Prompted::Other, Prompted::Cancel] {
            let prompt = prompt(requested, prompted, (42, &long), 7);
            assert_within_limits(&prompt);
            let placeholder = prompt["reply_markup"]["input_field_placeholder"].as_str();
            assert!(placeholder.is_some_and(|p| (1..=64).contains(&p.chars().count())));
        }
    }
}

#[test]
fn user_text_is_escaped_and_a_cut_message_says_so() {
    let requested = ask(vec![question(
        "q",
        2,
        false,
        "<a href=\"x\">click</a> & more",
    )]);
    let message = question_message("AAAAAAAAAAAAAAAA", &requested, true, true, None);
    let text = message["text"].as_str().expect("text");
    assert!(text.contains("&lt;a href=&quot;x&quot;&gt;click&lt;/a&gt; &amp; more"));
    assert!(!text.contains("<a "));
    let long = ask((0..20)
        .map(|i| question(&format!("q{i}"), 0, false, &"y".repeat(900)))
        .collect());
    let text = question_message("AAAAAAAAAAAAAAAA", &long, true, true, None)["text"].to_string();
    assert!(text.contains("cut: the whole ask is in the askgate console"));
}

#[test]
fn buttons_carry_opaque_data_that_decodes_back() {
    let key = ask_key("tenant", "session", &"r".repeat(200));
    assert_eq!(key.len(), 16);
    for data in [
        Data::Choose(key.clone(), 19),
        Data::Toggle(key.clone(), 3, true),
        Data::Toggle(key.clone(), 0, false),
        Data::Done(key.clone()),
        Data::Answer(key.clone()),
        Data::Other(key.clone()),
        Data::Cancel(key.clone()),
    ] {
        assert!(data.encode().len() <= 64);
        assert_eq!(Data::decode(&data.encode()), Some(data));
    }
    for bad in [
        "",
        "c",
        "c:short:1",
        "z:AAAAAAAAAAAAAAAA",
        "c:AAAAAAAAAAAAAAAA:x",
        "t:AAAAAAAAAAAAAAAA:1",
    ] {
        assert_eq!(Data::decode(bad), None, "{bad}");
    }
    // A multi-select keyboard's marks are read back from its buttons.
    let requested = ask(vec![question("q", 4, true, "Which?")]);
    let marked = BTreeSet::from([1, 3]);
    assert_eq!(super::marked(&keyboard(&key, &requested, &marked)), marked);
}

#[test]
fn replies_answer_by_number_or_in_own_words() {
    let one = ask(vec![question("q", 3, true, "Which?")]);
    let answers = parse_reply(&one, " 1, 3 ").expect("numbers");
    assert_eq!(answers[0].selected.len(), 2);
    let answers = parse_reply(&one, "none of them").expect("words");
    assert_eq!(answers[0].custom.as_deref(), Some("none of them"));
    let single = ask(vec![question("q", 3, false, "Which?")]);
    assert!(parse_reply(&single, "1 2").is_err());
    assert_eq!(
        parse_reply(&single, "4").expect("words")[0]
            .custom
            .as_deref(),
        Some("4")
    );
    let batch = ask(vec![
        question("a", 2, false, "A?"),
        question("b", 0, false, "B?"),
    ]);
    let answers = parse_reply(&batch, "2\nfree words").expect("a batch");
    assert_eq!(
        answers[0].selected,
        [batch.questions[0].options[1].label.clone()]
    );
    assert_eq!(answers[1].custom.as_deref(), Some("free words"));
    let skipped = parse_reply(&batch, "-").expect("a skip");
    assert!(
        skipped
            .iter()
            .all(|a| a.selected.is_empty() && a.custom.is_none())
    );
    assert!(parse_reply(&batch, "1\n2\n3").is_err());
}

#[test]
fn the_question_that_approves_an_action_offers_no_other() {
    let key = ask_key("tenant", "session", "r");
    let texts = |requested: &Requested| -> Vec<String> {
        keyboard(&key, requested, &BTreeSet::new())["inline_keyboard"]
            .as_array()
            .expect("rows")
            .iter()
            .flat_map(|row| row.as_array().expect("a row").clone())
            .map(|b| b["text"].as_str().expect("text").to_owned())
            .collect()
    };
    for multi in [false, true] {
        let mut gated = ask(vec![question("go", 2, multi, "Deploy?")]);
        assert!(texts(&gated).iter().any(|t| t.contains("Other")), "{multi}");
        gated.action = Some(Box::new(Action {
            name: "deploy".into(),
            arguments_json: "{}".into(),
            approving_answers: vec![askgate_proto::v1::QuestionAnswer {
                id: "go".into(),
                selected: vec![gated.questions[0].options[0].label.clone()],
                custom: None,
            }],
        }));
        let shown = texts(&gated);
        assert!(
            !shown.iter().any(|t| t.contains("Other")),
            "{multi}: {shown:?}"
        );
        assert!(shown.iter().any(|t| t.contains("Cancel")), "{multi}");
    }
}
