//! The interactive answering overlay of `askgate answer`. Its behaviour is pure and
//! tested without a terminal: [`state`] is one batch (drafts, cursor, what each key
//! does), [`queue`] the batches waiting for this terminal and the subscription's
//! events, [`view`] draws them (tested on ratatui's `TestBackend`). [`run`] puts them
//! on a terminal; [`lines`] is the same as line prompts, without one.

pub mod lines;
pub mod queue;
pub mod run;
pub mod state;
pub mod view;

/// The channel the overlay answers from (`askgate-channel`): an ask whose
/// allowed_channels leave it out cannot be answered here.
pub const OVERLAY_CHANNEL: &str = "tui";

/// A question with these option labels, for the overlay's tests.
#[cfg(test)]
fn test_question(id: &str, labels: &[&str], multi_select: bool) -> askgate_proto::v1::Question {
    askgate_proto::v1::Question {
        id: id.into(),
        question: format!("{id}?"),
        options: labels
            .iter()
            .map(|label| askgate_proto::v1::QuestionOption {
                label: (*label).into(),
                description: None,
            })
            .collect(),
        multi_select,
        ..Default::default()
    }
}
