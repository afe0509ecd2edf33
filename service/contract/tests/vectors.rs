//! `tests/contract/vectors.json`: what every askgate SDK must compute alike (canonical
//! JSON, action digests, the answers JSON and its digest). The Python and TypeScript
//! SDKs' tests read the same file, so the three languages agree by construction.
//!
//! To add a case, write its inputs (and leave out what is expected), then run
//! `ASKGATE_CONTRACT_FILL=1 cargo test -p askgate-contract --test vectors`: the expected
//! fields missing are filled in from this crate, never the ones there already. Read
//! what it wrote before committing it.

use std::path::PathBuf;

use askgate_contract::{
    answers::{answers_text, answers_value},
    canonical::canonical,
    digest::{DigestError, action_digest, answers_digest},
};
use askgate_proto::v1::QuestionAnswer;
use serde_json::{Map, Value};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/contract/vectors.json")
}

fn text<'a>(case: &'a Map<String, Value>, field: &str) -> &'a str {
    case.get(field)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{case:?} has no string {field}"))
}

/// What this crate computes for a case of `kind`, by field.
fn computed(kind: &str, case: &Map<String, Value>) -> Vec<(&'static str, Value)> {
    match kind {
        "canonical" => {
            let value: Value = serde_json::from_str(text(case, "json")).expect("the input is JSON");
            vec![("canonical", canonical(&value).into())]
        }
        "action_digest" => {
            let action = case["action"].as_object().expect("an action");
            match action_digest(text(action, "name"), text(action, "arguments_json")) {
                Ok(digest) => vec![("digest", digest.into())],
                Err(DigestError::Inexact { .. }) => vec![("error", "inexact".into())],
                Err(DigestError::NotJson(_)) => vec![("error", "not_json".into())],
            }
        }
        "answers" => {
            let answers: Vec<QuestionAnswer> = case["answers"]
                .as_array()
                .expect("answers")
                .iter()
                .map(|a| QuestionAnswer {
                    id: a["id"].as_str().expect("an id").into(),
                    selected: a["selected"]
                        .as_array()
                        .expect("selected")
                        .iter()
                        .map(|s| s.as_str().expect("a label").into())
                        .collect(),
                    custom: a.get("custom").and_then(Value::as_str).map(Into::into),
                })
                .collect();
            let secret: Vec<&str> = case["secret"]
                .as_array()
                .expect("secret")
                .iter()
                .map(|s| s.as_str().expect("an id"))
                .collect();
            let is_secret = |id: &str| secret.contains(&id);
            vec![
                ("text", answers_text(&answers).into()),
                (
                    "canonical",
                    canonical(&answers_value(&answers, is_secret)).into(),
                ),
                ("digest", answers_digest(&answers, is_secret).into()),
            ]
        }
        other => panic!("no such kind of vector: {other}"),
    }
}

#[test]
fn every_vector_holds() {
    let path = path();
    let fill = std::env::var_os("ASKGATE_CONTRACT_FILL").is_some();
    let mut vectors: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("vectors.json is JSON");
    let mut checked = 0;
    let mut filled = 0;
    for (kind, cases) in vectors.as_object_mut().expect("an object") {
        if kind.starts_with('_') {
            continue;
        }
        for case in cases.as_array_mut().expect("a list of cases") {
            let case = case.as_object_mut().expect("a case");
            for (field, value) in computed(kind, case) {
                match case.get(field) {
                    Some(expected) => {
                        assert_eq!(&value, expected, "{kind} {:?}: {field}", case["name"]);
                        checked += 1;
                    }
                    None if fill => {
                        case.insert(field.into(), value);
                        filled += 1;
                    }
                    None => panic!("{kind} {:?} has no {field}: fill it in", case["name"]),
                }
            }
        }
    }
    if filled > 0 {
        let text = serde_json::to_string_pretty(&vectors).expect("serialises") + "\n";
        std::fs::write(&path, text).expect("vectors.json written");
        panic!("{filled} expected values filled in: read them, then run again");
    }
    assert!(
        checked >= 20,
        "only {checked} values checked: is the file complete?"
    );
}
