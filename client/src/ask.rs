//! Builders for an ask and its questions.

use std::time::Duration;

use crate::proto::{AskRequest, Intent, PlanReview, Question, QuestionOption, Unattended, intent};

/// Starts a question with its id (unique within the ask) and text.
pub fn question(id: &str, text: &str) -> QuestionBuilder {
    QuestionBuilder(Question {
        id: id.to_owned(),
        question: text.to_owned(),
        ..Default::default()
    })
}

/// A question under construction; converts into [`Question`].
#[derive(Debug, Clone)]
pub struct QuestionBuilder(Question);

impl QuestionBuilder {
    /// A short label shown as a chip or tab title.
    pub fn header(mut self, header: &str) -> Self {
        self.0.header = Some(header.to_owned());
        self
    }

    /// Longer context; the plan itself for a plan review.
    pub fn detail(mut self, detail: &str) -> Self {
        self.0.detail = Some(detail.to_owned());
        self
    }

    /// Adds an option with a description.
    pub fn option(mut self, label: &str, description: &str) -> Self {
        self.0.options.push(QuestionOption {
            label: label.to_owned(),
            description: Some(description.to_owned()),
        });
        self
    }

    /// Adds an option without a description.
    pub fn choice(mut self, label: &str) -> Self {
        self.0.options.push(QuestionOption {
            label: label.to_owned(),
            description: None,
        });
        self
    }

    /// Lets the human pick several options.
    pub fn multi_select(mut self) -> Self {
        self.0.multi_select = true;
        self
    }

    /// Presents the question as a review of the plan in `detail`; `approve` is the
    /// option label that means "go ahead".
    pub fn plan_review(mut self, approve: &str) -> Self {
        self.0.intent = Some(Intent {
            kind: Some(intent::Kind::PlanReview(PlanReview {
                approve: approve.to_owned(),
            })),
        });
        self
    }

    /// The finished question.
    pub fn build(self) -> Question {
        self.0
    }
}

impl From<QuestionBuilder> for Question {
    fn from(builder: QuestionBuilder) -> Self {
        builder.0
    }
}

/// One `Ask`: a batch of questions for a session, and how long to wait.
#[derive(Debug, Clone)]
pub struct Ask {
    request: AskRequest,
    timeout: Option<Duration>,
}

impl Ask {
    /// An empty batch for `session_id`; add questions with [`Ask::question`].
    pub fn new(session_id: &str) -> Self {
        Self {
            request: AskRequest {
                session_id: session_id.to_owned(),
                ..Default::default()
            },
            timeout: None,
        }
    }

    /// Adds a question.
    pub fn question(mut self, question: impl Into<Question>) -> Self {
        self.request.questions.push(question.into());
        self
    }

    /// How long to wait for a human (sent as the gRPC deadline). Without one the
    /// server's maximum wait applies.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Keeps the ask pending when nobody is subscribed to the session yet, instead of
    /// failing with [`crate::Reason::NoProvider`].
    pub fn hold_unattended(mut self) -> Self {
        self.request.if_unattended = Unattended::Hold.into();
        self
    }

    /// A label shown to the UIs along with the questions.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.request.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// The wire request, for callers that need fields the builder does not cover.
    pub fn request_mut(&mut self) -> &mut AskRequest {
        &mut self.request
    }

    pub(crate) fn has_timeout(&self) -> bool {
        self.timeout.is_some()
    }

    pub(crate) fn into_request(self) -> tonic::Request<AskRequest> {
        let mut request = tonic::Request::new(self.request);
        if let Some(timeout) = self.timeout {
            request.set_timeout(timeout);
        }
        request
    }
}

impl From<AskRequest> for Ask {
    fn from(request: AskRequest) -> Self {
        Self {
            request,
            timeout: None,
        }
    }
}
