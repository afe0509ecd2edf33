//! Answer validation and normalisation (docs/protocol.md, Semantics 4). A batch is checked
//! whole against the pending ask's questions before anyone claims the ask, so a refused
//! batch leaves the question pending.

use askgate_proto::v1::{Question, QuestionAnswer};

use super::{Error, Limits, Violation, echo, seen::Seen};

/// Checks a complete answer batch and returns it normalised, in question order:
/// - every question answered exactly once, no unknown id;
/// - `selected` holds option labels only, no duplicates, at most one on a single-select
///   question, none on an optionless one;
/// - `custom` is trimmed, empty means absent; on a single-select question it overrides
///   the selection (`selected` comes back empty), on a multi-select one it adds to it;
/// - `{id, selected: []}` without custom is an explicit skip.
pub fn normalize(
    questions: &[Question],
    answers: Vec<QuestionAnswer>,
    limits: &Limits,
) -> Result<Vec<QuestionAnswer>, Error> {
    check(questions, answers, limits, true)
}

/// [`normalize`] for answers to some of the questions (approving answers): each
/// answer checked as in a batch, no question answered twice, none required.
pub fn normalize_some(
    questions: &[Question],
    answers: Vec<QuestionAnswer>,
    limits: &Limits,
) -> Result<Vec<QuestionAnswer>, Error> {
    check(questions, answers, limits, false)
}

fn check(
    questions: &[Question],
    answers: Vec<QuestionAnswer>,
    limits: &Limits,
    complete: bool,
) -> Result<Vec<QuestionAnswer>, Error> {
    let mut normalized: Vec<Option<QuestionAnswer>> = vec![None; questions.len()];
    let mut violations = Vec::new();

    for (i, answer) in answers.into_iter().enumerate() {
        // An ask holds at most `max_questions` (32 by default): a scan, no index.
        let Some(q) = questions.iter().position(|q| q.id == answer.id) else {
            violations.push(Violation::new(
                format!("answers[{i}].id"),
                format!("{} is not a question of this ask", echo(&answer.id)),
            ));
            continue;
        };
        if normalized[q].is_some() {
            violations.push(Violation::new(
                format!("answers[{i}].id"),
                format!("question {} is answered more than once", echo(&answer.id)),
            ));
            continue;
        }
        match one(i, &questions[q], answer, limits) {
            Ok(answer) => normalized[q] = Some(answer),
            Err(mut errors) => {
                violations.append(&mut errors);
                // Mark it seen so a duplicate is still reported as such.
                normalized[q] = Some(QuestionAnswer::default());
            }
        }
    }
    for (question, answer) in questions.iter().zip(&normalized) {
        if complete && answer.is_none() {
            violations.push(Violation::new(
                "answers",
                format!(
                    "question {} has no answer; skip it explicitly with an empty selection",
                    echo(&question.id)
                ),
            ));
        }
    }
    if !violations.is_empty() {
        return Err(Error::BadAnswer(violations));
    }
    Ok(normalized.into_iter().flatten().collect())
}

/// Checks the `i`th answer of a batch against its question. Field paths are written
/// only for the violations found.
fn one(
    i: usize,
    question: &Question,
    answer: QuestionAnswer,
    limits: &Limits,
) -> Result<QuestionAnswer, Vec<Violation>> {
    let mut violations = Vec::new();
    if question.options.is_empty() && !answer.selected.is_empty() {
        violations.push(Violation::new(
            format!("answers[{i}].selected"),
            format!(
                "question {} has no options; answer it with custom text",
                echo(&question.id)
            ),
        ));
    } else {
        // A valid selection names each option once at most: a longer one goes through a
        // set (see `Seen`).
        let mut seen = Seen::for_list(answer.selected.len(), question.options.len());
        for (j, label) in answer.selected.iter().enumerate() {
            let field = || format!("answers[{i}].selected[{j}]");
            if !question.options.iter().any(|o| &o.label == label) {
                violations.push(Violation::new(
                    field(),
                    format!(
                        "{} is not an option of question {}",
                        echo(label),
                        echo(&question.id)
                    ),
                ));
            } else if seen.repeated(answer.selected[..j].iter().map(String::as_str), label) {
                violations.push(Violation::new(
                    field(),
                    format!("{} is selected more than once", echo(label)),
                ));
            }
        }
        if !question.multi_select && answer.selected.len() > 1 {
            violations.push(Violation::new(
                format!("answers[{i}].selected"),
                format!("question {} takes at most one option", echo(&question.id)),
            ));
        }
    }
    let custom = answer
        .custom
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    if let Some(text) = custom
        && text.len() > limits.max_custom_bytes
    {
        violations.push(Violation::new(
            format!("answers[{i}].custom"),
            format!("must be at most {} bytes", limits.max_custom_bytes),
        ));
    }
    if !violations.is_empty() {
        return Err(violations);
    }
    let selected = match (question.multi_select, custom) {
        (false, Some(_)) => Vec::new(),
        _ => answer.selected,
    };
    Ok(QuestionAnswer {
        id: answer.id,
        selected,
        custom: custom.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::QuestionOption;

    use super::*;

    fn question(id: &str, labels: &[&str], multi_select: bool) -> Question {
        Question {
            id: id.into(),
            question: format!("{id}?"),
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    label: (*l).into(),
                    description: None,
                })
                .collect(),
            multi_select,
            ..Default::default()
        }
    }

    fn answer(id: &str, selected: &[&str], custom: Option<&str>) -> QuestionAnswer {
        QuestionAnswer {
            id: id.into(),
            selected: selected.iter().map(|s| (*s).into()).collect(),
            custom: custom.map(str::to_owned),
        }
    }

    /// single (pick one of a/b), multi (any of a/b/c), free (no options).
    fn questions() -> Vec<Question> {
        vec![
            question("single", &["a", "b"], false),
            question("multi", &["a", "b", "c"], true),
            question("free", &[], false),
        ]
    }

    fn run(answers: Vec<QuestionAnswer>) -> Result<Vec<QuestionAnswer>, Error> {
        normalize(&questions(), answers, &Limits::default())
    }

    fn fields(result: Result<Vec<QuestionAnswer>, Error>) -> Vec<String> {
        let err = result.expect_err("the batch must be refused");
        assert_eq!(err.reason(), "BAD_ANSWER");
        err.violations().iter().map(|v| v.field.clone()).collect()
    }

    #[test]
    fn a_complete_batch_comes_back_in_question_order() {
        let got = run(vec![
            answer("free", &[], Some("  hello ")),
            answer("multi", &["c", "a"], None),
            answer("single", &["b"], None),
        ]);
        assert_eq!(
            got,
            Ok(vec![
                answer("single", &["b"], None),
                answer("multi", &["c", "a"], None),
                answer("free", &[], Some("hello")),
            ])
        );
    }

    #[test]
    fn an_empty_selection_without_custom_is_an_explicit_skip() {
        let skips = vec![
            answer("single", &[], None),
            answer("multi", &[], Some("   ")),
            answer("free", &[], Some("")),
        ];
        assert_eq!(
            run(skips),
            Ok(vec![
                answer("single", &[], None),
                answer("multi", &[], None),
                answer("free", &[], None),
            ])
        );
    }

    #[test]
    fn custom_overrides_on_single_select_and_adds_on_multi_select() {
        let got = run(vec![
            answer("single", &["a"], Some(" other ")),
            answer("multi", &["b"], Some("also this")),
            answer("free", &[], None),
        ]);
        assert_eq!(
            got,
            Ok(vec![
                answer("single", &[], Some("other")),
                answer("multi", &["b"], Some("also this")),
                answer("free", &[], None),
            ])
        );
    }

    #[test]
    fn a_missing_question_is_refused() {
        let got = run(vec![
            answer("single", &["a"], None),
            answer("free", &[], None),
        ]);
        assert_eq!(fields(got), ["answers"]);
    }

    #[test]
    fn an_unknown_or_repeated_id_is_refused() {
        let got = run(vec![
            answer("single", &["a"], None),
            answer("multi", &[], None),
            answer("free", &[], None),
            answer("nope", &[], None),
            answer("single", &["b"], None),
        ]);
        assert_eq!(fields(got), ["answers[3].id", "answers[4].id"]);
    }

    #[test]
    fn selected_holds_option_labels_only() {
        let got = run(vec![
            answer("single", &["A"], None),
            answer("multi", &["a", "zzz"], None),
            answer("free", &[], None),
        ]);
        assert_eq!(
            fields(got),
            ["answers[0].selected[0]", "answers[1].selected[1]"]
        );
    }

    #[test]
    fn a_label_cannot_be_selected_twice() {
        let got = run(vec![
            answer("single", &["a"], None),
            answer("multi", &["b", "b"], None),
            answer("free", &[], None),
        ]);
        assert_eq!(fields(got), ["answers[1].selected[1]"]);

        // Longer than the question's options: the repeats are found all the same.
        let got = run(vec![
            answer("single", &["a"], None),
            answer("multi", &["b", "zzz", "c", "a", "b", "c"], None),
            answer("free", &[], None),
        ]);
        assert_eq!(
            fields(got),
            [
                "answers[1].selected[1]",
                "answers[1].selected[4]",
                "answers[1].selected[5]"
            ]
        );
    }

    #[test]
    fn single_select_takes_at_most_one_option() {
        let got = run(vec![
            answer("single", &["a", "b"], None),
            answer("multi", &["a", "b", "c"], None),
            answer("free", &[], None),
        ]);
        assert_eq!(fields(got), ["answers[0].selected"]);
    }

    #[test]
    fn an_optionless_question_takes_no_selection() {
        let got = run(vec![
            answer("single", &[], None),
            answer("multi", &[], None),
            answer("free", &["a"], Some("text")),
        ]);
        assert_eq!(fields(got), ["answers[2].selected"]);
    }

    #[test]
    fn custom_text_is_bounded() {
        let long = "x".repeat(Limits::default().max_custom_bytes + 1);
        let got = run(vec![
            answer("single", &[], None),
            answer("multi", &[], None),
            answer("free", &[], Some(&long)),
        ]);
        assert_eq!(fields(got), ["answers[2].custom"]);
    }

    #[test]
    fn an_empty_batch_names_every_question() {
        let err = run(vec![]).expect_err("empty batch");
        assert_eq!(err.violations().len(), 3);
    }

    mod properties {
        use proptest::{collection::vec, option, prelude::*};

        use super::*;

        /// Names from a small alphabet (so answers often name real ids and labels),
        /// with spaces and a non-ASCII letter.
        fn name() -> impl Strategy<Value = String> {
            "[ab é]{0,3}"
        }

        /// Valid questions: unique ids, unique labels (validation guarantees both).
        fn questions() -> impl Strategy<Value = Vec<Question>> {
            vec((vec(name(), 0..4), any::<bool>()), 1..4).prop_map(|specs| {
                specs
                    .into_iter()
                    .enumerate()
                    .map(|(i, (mut labels, multi_select))| {
                        labels.sort();
                        labels.dedup();
                        Question {
                            id: format!("q{i}"),
                            question: "?".into(),
                            options: labels
                                .into_iter()
                                .map(|label| QuestionOption {
                                    label,
                                    description: None,
                                })
                                .collect(),
                            multi_select,
                            ..Default::default()
                        }
                    })
                    .collect()
            })
        }

        fn answers() -> impl Strategy<Value = Vec<QuestionAnswer>> {
            vec(
                ("q[0-3]", vec(name(), 0..4), option::of("[ x]{0,4}")).prop_map(
                    |(id, selected, custom)| QuestionAnswer {
                        id,
                        selected,
                        custom,
                    },
                ),
                0..6,
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// Never a panic; a normalised batch normalises to itself; a refused one
            /// names at least one field.
            #[test]
            fn normalisation_is_idempotent(questions in questions(), answers in answers()) {
                let limits = Limits::default();
                match normalize(&questions, answers, &limits) {
                    Ok(normalized) => {
                        let again = normalize(&questions, normalized.clone(), &limits);
                        prop_assert_eq!(again, Ok(normalized));
                    }
                    Err(error) => prop_assert!(!error.violations().is_empty()),
                }
            }
        }
    }
}
