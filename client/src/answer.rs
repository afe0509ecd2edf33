//! Builders for the entries of an answer batch. A batch must hold one entry per
//! question of the ask.

use crate::proto::QuestionAnswer;

/// Chooses option labels (one on a single-select question).
pub fn select<I, S>(id: &str, labels: I) -> QuestionAnswer
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    QuestionAnswer {
        id: id.to_owned(),
        selected: labels.into_iter().map(Into::into).collect(),
        custom: None,
    }
}

/// Answers with free text ("Other"): replaces the choice on a single-select question,
/// adds to it on a multi-select one, and is the answer to an optionless question.
pub fn custom(id: &str, text: &str) -> QuestionAnswer {
    QuestionAnswer {
        id: id.to_owned(),
        selected: Vec::new(),
        custom: Some(text.to_owned()),
    }
}

/// Skips a question explicitly.
pub fn skip(id: &str) -> QuestionAnswer {
    QuestionAnswer {
        id: id.to_owned(),
        selected: Vec::new(),
        custom: None,
    }
}
