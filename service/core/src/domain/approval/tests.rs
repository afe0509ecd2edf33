use askgate_proto::v1::{Action, Question, QuestionAnswer, Quorum};

use super::*;

fn ask() -> AskRequest {
    AskRequest {
        session_id: "s".into(),
        questions: vec![Question {
            id: "q".into(),
            question: "Deploy?".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn fields(request: &AskRequest) -> Vec<String> {
    violations(request, &Limits::default())
        .into_iter()
        .map(|v| v.field)
        .collect()
}

#[test]
fn spellings_of_one_person_are_one_person() {
    assert!(same_person("alice", "Alice"));
    assert!(same_person("ALICE", "alice"));
    assert!(same_person(
        "email:Ana+1@Example.org",
        "email:ana+ops@example.org"
    ));
    assert!(same_person(
        "email:ana@example.org",
        "email:ana+2@example.org"
    ));
    assert!(same_person("slack:T1/U2", "slack:t1/u2"));
    assert!(!same_person("alice", "alicia"));
    assert!(!same_person(
        "email:ana@example.org",
        "email:bo@example.org"
    ));
    // A `+` outside an email identity is part of the name.
    assert!(!same_person("ci+bot", "ci"));
    assert!(same_person("Straße", "straße"));
}

#[test]
fn approvers_are_persons_or_members_of_a_group() {
    let mut requested = Requested::default();
    assert!(
        approvers_at(&requested, u64::MAX).is_none(),
        "no approvers: anyone"
    );
    requested.approvers = Some(Box::new(Approvers {
        subjects: vec!["Ana".into(), "email:bo@example.org".into()],
        groups: vec!["ops".into()],
        cancel_too: false,
    }));
    let approvers = requested.approvers.as_deref().expect("set");
    let named = |who: &str, groups: &[&str]| {
        let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        names(approvers, &[who], &groups)
    };
    assert!(named("ana", &[]));
    assert!(named("email:bo+x@Example.org", &[]));
    assert!(named("cy", &["dev", "ops"]));
    assert!(!named("cy", &["Ops"]), "groups are exact");
    assert!(!named("anna", &[]));
    // Any identity of a person's counts.
    assert!(names(approvers, &["cy", "email:bo@example.org"], &[]));
    assert_eq!(
        approvers_text(approvers),
        "Ana, email:bo@example.org or a member of ops"
    );
}

#[test]
fn who_may_answer_is_said_within_its_bound() {
    let many = Approvers {
        subjects: (0..32)
            .map(|i| format!("person-{i:02}-{}", "x".repeat(40)))
            .collect(),
        groups: vec!["ops".into()],
        cancel_too: false,
    };
    let text = approvers_text(&many);
    assert!(text.len() <= MAX_WHO_BYTES + 20, "{}", text.len());
    assert!(text.ends_with("more)"), "{text}");
    let one = Approvers {
        groups: vec!["ops".into()],
        ..Default::default()
    };
    assert_eq!(approvers_text(&one), "a member of ops");
}

#[test]
fn approvers_are_bounded_and_can_be_met() {
    let with = |approvers: Approvers, quorum: Option<u32>| {
        let mut request = ask();
        request.approvers = Some(Box::new(approvers));
        request.quorum = quorum.map(|count| Quorum { count });
        fields(&request)
    };
    let subjects = |names: &[&str]| Approvers {
        subjects: names.iter().map(|n| (*n).to_owned()).collect(),
        ..Default::default()
    };
    assert!(with(subjects(&["ana", "bo"]), Some(2)).is_empty());
    assert_eq!(with(subjects(&["ana", "ANA"]), Some(2)), ["quorum.count"]);
    let grouped = Approvers {
        groups: vec!["ops".into()],
        ..subjects(&["ana"])
    };
    assert!(with(grouped, Some(3)).is_empty(), "a group may hold more");
    assert_eq!(
        with(subjects(&["", "askgate:x", "a\nb", &"y".repeat(257)]), None),
        [
            "approvers.subjects[0]",
            "approvers.subjects[1]",
            "approvers.subjects[2]",
            "approvers.subjects[3]"
        ]
    );
    let nobody = Approvers {
        cancel_too: true,
        ..Default::default()
    };
    assert_eq!(with(nobody, None), ["approvers.cancel_too"]);
    let crowd: Vec<String> = (0..33).map(|i| i.to_string()).collect();
    let crowd = Approvers {
        groups: crowd,
        ..Default::default()
    };
    assert_eq!(with(crowd, None), ["approvers.groups"]);
}

#[test]
fn the_servers_own_subjects_are_reserved() {
    for refused in ["askgate:default", "Askgate:default", "ASKGATE:", ""] {
        assert!(credential_subject(refused).is_err(), "{refused}");
    }
    for taken in ["ana", "askgate", "askgate-bot", "x:askgate:y"] {
        assert!(credential_subject(taken).is_ok(), "{taken}");
    }
}

#[test]
fn an_ask_without_approval_fields_passes() {
    assert!(fields(&ask()).is_empty());
}

#[test]
fn an_action_needs_a_name_and_json_arguments_within_the_limit() {
    let with = |name: &str, arguments: String| AskRequest {
        action: Some(Box::new(Action {
            name: name.into(),
            arguments_json: arguments,
            ..Default::default()
        })),
        ..ask()
    };
    assert!(fields(&with("deploy", r#"{"env":"prod"}"#.into())).is_empty());
    assert_eq!(fields(&with(" ", "{}".into())), ["action.name"]);
    assert_eq!(
        fields(&with("x", "{nope".into())),
        ["action.arguments_json"]
    );
    assert_eq!(fields(&with("x", String::new())), ["action.arguments_json"]);
    let huge = format!("\"{}\"", "a".repeat(MAX_ACTION_ARGUMENTS_BYTES));
    assert_eq!(fields(&with("x", huge)), ["action.arguments_json"]);
}

#[test]
fn a_quorum_is_two_to_ten() {
    for (count, ok) in [(0, false), (1, false), (2, true), (10, true), (11, false)] {
        let request = AskRequest {
            quorum: Some(Quorum { count }),
            ..ask()
        };
        assert_eq!(fields(&request).is_empty(), ok, "{count}");
    }
}

#[test]
fn channels_are_short_lowercase_names_and_the_servers_cannot_be_claimed() {
    let request = AskRequest {
        allowed_channels: vec!["console".into(), "Slack".into(), String::new()],
        ..ask()
    };
    assert_eq!(
        fields(&request),
        ["allowed_channels[1]", "allowed_channels[2]"]
    );
    let human = || ["slack", "email"].into_iter();
    assert!(claimed_channel("tui", human()).is_ok());
    assert!(claimed_channel("my-sdk.py", human()).is_ok());
    for refused in [
        "console", "slack", "email", "mcp", "askgate", "", "A", "x y",
    ] {
        assert!(claimed_channel(refused, human()).is_err(), "{refused}");
    }
}

#[test]
fn a_secret_question_takes_no_quorum_and_no_default() {
    let mut request = ask();
    request.questions[0].secret = true;
    assert!(fields(&request).is_empty());
    request.default_answers = vec![QuestionAnswer {
        id: "q".into(),
        ..Default::default()
    }];
    request.quorum = Some(Quorum { count: 2 });
    assert_eq!(
        fields(&request),
        ["questions[0].secret", "questions[0].secret"]
    );
}

#[test]
fn secret_answers_part_and_come_back_in_the_questions_order() {
    let question = |id: &str, secret| Question {
        id: id.into(),
        secret,
        ..Default::default()
    };
    let questions = [
        question("a", false),
        question("pin", true),
        question("c", false),
    ];
    let answer = |id: &str| QuestionAnswer {
        id: id.into(),
        custom: Some(format!("{id}!")),
        ..Default::default()
    };
    let (public, secret) = split_secret(&questions, vec![answer("a"), answer("pin"), answer("c")]);
    let ids = |answers: &[QuestionAnswer]| answers.iter().map(|a| a.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&public), ["a", "c"]);
    assert_eq!(ids(&secret), ["pin"]);
    let order: Vec<String> = questions.iter().map(|q| q.id.clone()).collect();
    assert_eq!(
        ids(&merge_secret(&order, public.clone(), secret.clone())),
        ["a", "pin", "c"]
    );
    // Without the order (a retry that named other questions): after the others.
    assert_eq!(ids(&merge_secret(&[], public, secret)), ["a", "c", "pin"]);
    assert!(has_secret(&questions));
}

#[test]
fn escalation_steps_widen_or_replace_the_approvers_in_their_time() {
    use askgate_proto::v1::EscalationStep;
    let subjects = |names: &[&str]| Approvers {
        subjects: names.iter().map(|n| (*n).to_owned()).collect(),
        ..Default::default()
    };
    let requested = Requested {
        requested_at: Some((std::time::UNIX_EPOCH + std::time::Duration::from_secs(1)).into()),
        approvers: Some(Box::new(subjects(&["ana"]))),
        escalation: vec![
            EscalationStep {
                after_ms: 100,
                approvers: Some(subjects(&["bo"])),
                ..Default::default()
            },
            EscalationStep {
                after_ms: 200,
                approvers: Some(subjects(&["cy"])),
                replace: true,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let at = |ms: u64| approvers_at(&requested, ms).map(|a| a.subjects.clone());
    assert_eq!(at(1_099), Some(vec!["ana".to_owned()]));
    assert_eq!(at(1_100), Some(vec!["ana".to_owned(), "bo".to_owned()]));
    assert_eq!(at(1_200), Some(vec!["cy".to_owned()]));
    assert!(names_approvers(&requested));
    // An ask open to everyone stays so when a step only adds.
    let open = Requested {
        approvers: None,
        escalation: requested.escalation[..1].to_vec(),
        ..requested.clone()
    };
    assert!(approvers_at(&open, u64::MAX).is_none());
    assert!(
        names_approvers(&open),
        "answers are still told apart by person"
    );
}
