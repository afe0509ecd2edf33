//! What the answering overlay does with each key, apart from drawing and from I/O: a
//! batch's drafts, the question and option under the cursor, and the mode the keyboard
//! is in. A key goes in, an [`Action`] for the caller comes out; the renderer only
//! reads the state.

use askgate_proto::v1::{Question, QuestionAnswer, Requested, intent};

/// A key the overlay acts on (terminal key events map onto these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Left,
    Right,
    Enter,
    Esc,
    Backspace,
    Tab,
    BackTab,
    PageUp,
    PageDown,
    Char(char),
}

/// What the caller does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    None,
    /// Send this complete batch with `Answer`.
    Submit(Vec<QuestionAnswer>),
    /// Close the whole batch with `Cancel`; the reason (possibly empty) reaches the
    /// agent.
    Cancel(String),
    /// Leave the overlay; the batch stays pending for other UIs.
    Quit,
}

/// Where one question's answer stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Status {
    #[default]
    Open,
    Answered,
    Skipped,
}

/// One question's draft: kept when the human moves to another question and back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draft {
    /// Chosen labels in the order chosen, each at most once.
    pub selected: Vec<String>,
    /// The free-text ("Other") answer.
    pub custom: Option<String>,
    pub status: Status,
}

/// What the keyboard is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Moving over the current question's options.
    Choosing,
    /// Typing the current question's free-text answer.
    Typing(String),
    /// Every question is answered or skipped: Enter submits the batch.
    Review,
    /// Typing the optional reason for cancelling the whole batch.
    CancelReason(String),
    /// The key help, over the mode it returns to.
    Help(Box<Mode>),
}

/// The suffix that marks an option the asker recommends: shown as a badge, never
/// preselected.
pub const RECOMMENDED: &str = "(Recommended)";

/// One batch on screen.
#[derive(Debug, Clone)]
pub struct Overlay {
    pub batch: Requested,
    /// The question shown.
    pub item: usize,
    /// The option row under the cursor.
    pub cursor: usize,
    pub drafts: Vec<Draft>,
    pub mode: Mode,
    /// How far the question's detail text is scrolled, in lines.
    pub detail_scroll: u16,
    /// Why the last key could not do anything, for a one-line hint.
    pub hint: Option<Hint>,
}

/// Why a key could not do anything; each front end words it with its own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// Enter on a multi-select question with nothing chosen.
    NothingChosen,
    /// Enter on an empty own-words answer.
    EmptyAnswer,
    /// Own words or a skip on the question that approves the ask's action.
    ChooseToApprove,
}

impl Hint {
    /// The hint in the overlay's keys.
    pub fn keys(self) -> &'static str {
        match self {
            Self::NothingChosen => "choose with Space, o for your own answer, s to skip",
            Self::EmptyAnswer => "type an answer, or Esc then s to skip",
            Self::ChooseToApprove => {
                "this question approves an action: choose one of its options (or c to cancel)"
            }
        }
    }
}

impl Overlay {
    pub fn new(batch: Requested) -> Self {
        let drafts = vec![Draft::default(); batch.questions.len()];
        let mut overlay = Self {
            batch,
            item: 0,
            cursor: 0,
            drafts,
            mode: Mode::Choosing,
            detail_scroll: 0,
            hint: None,
        };
        overlay.enter_item(0);
        overlay
    }

    /// The question shown (None only for a batch without questions, which the
    /// service never sends).
    pub fn question(&self) -> Option<&Question> {
        self.batch.questions.get(self.item)
    }

    /// Whether the question shown approves the ask's action: its options alone answer
    /// it (no own words, no skip).
    pub fn approving(&self) -> bool {
        self.question()
            .is_some_and(|q| askgate_server::domain::approval::approves_action(&self.batch, &q.id))
    }

    /// The approve option's label when the question asks to review a plan.
    pub fn plan_approve(question: &Question) -> Option<&str> {
        match question.intent.as_ref()?.kind.as_ref()? {
            intent::Kind::PlanReview(review) => Some(review.approve.as_str()),
        }
    }

    /// Every question answered or skipped.
    pub fn complete(&self) -> bool {
        self.drafts.iter().all(|d| d.status != Status::Open)
    }

    /// The batch as `Answer` takes it: one entry per question, in order.
    pub fn answers(&self) -> Vec<QuestionAnswer> {
        self.batch
            .questions
            .iter()
            .zip(&self.drafts)
            .map(|(question, draft)| match draft.status {
                Status::Answered => QuestionAnswer {
                    id: question.id.clone(),
                    // A single-select's free text replaces the choice (docs/protocol.md, Semantics 4).
                    selected: match (question.multi_select, &draft.custom) {
                        (false, Some(_)) => Vec::new(),
                        _ => draft.selected.clone(),
                    },
                    custom: draft.custom.clone(),
                },
                Status::Open | Status::Skipped => QuestionAnswer {
                    id: question.id.clone(),
                    selected: Vec::new(),
                    custom: None,
                },
            })
            .collect()
    }

    pub fn on_key(&mut self, key: Key) -> Action {
        self.hint = None;
        match std::mem::replace(&mut self.mode, Mode::Choosing) {
            Mode::Help(underneath) => {
                self.mode = *underneath;
                Action::None
            }
            Mode::Typing(text) => self.typing(text, key),
            Mode::CancelReason(reason) => self.cancel_reason(reason, key),
            Mode::Review => self.review(key),
            Mode::Choosing => self.choosing(key),
        }
    }

    fn choosing(&mut self, key: Key) -> Action {
        let Some(question) = self.question().cloned() else {
            return Action::Quit;
        };
        let options = question.options.len();
        match key {
            Key::Up | Key::Char('k') => self.cursor = self.cursor.saturating_sub(1),
            Key::Down | Key::Char('j') => self.cursor = (self.cursor + 1).min(options.max(1) - 1),
            Key::PageUp => self.detail_scroll = self.detail_scroll.saturating_sub(5),
            Key::PageDown => self.detail_scroll = self.detail_scroll.saturating_add(5),
            Key::Left | Key::BackTab | Key::Char('h') => {
                self.enter_item(self.item.saturating_sub(1))
            }
            Key::Right | Key::Tab | Key::Char('l') => {
                if self.item + 1 < self.drafts.len() {
                    self.enter_item(self.item + 1);
                } else if self.complete() {
                    self.mode = Mode::Review;
                }
            }
            Key::Char(' ') if question.multi_select => {
                let label = &question.options[self.cursor].label;
                let draft = &mut self.drafts[self.item];
                match draft.selected.iter().position(|l| l == label) {
                    Some(at) => {
                        draft.selected.remove(at);
                    }
                    None => draft.selected.push(label.clone()),
                }
            }
            Key::Enter if options == 0 => self.mode = Mode::Typing(self.custom_text()),
            Key::Enter if question.multi_select => {
                let draft = &mut self.drafts[self.item];
                if draft.selected.is_empty() && draft.custom.is_none() {
                    self.hint = Some(Hint::NothingChosen);
                } else {
                    draft.status = Status::Answered;
                    self.advance();
                }
            }
            Key::Enter => {
                let label = question.options[self.cursor].label.clone();
                let draft = &mut self.drafts[self.item];
                draft.selected = vec![label];
                draft.custom = None;
                draft.status = Status::Answered;
                self.advance();
            }
            Key::Char('o') | Key::Char('s') if self.approving() => {
                self.hint = Some(Hint::ChooseToApprove);
            }
            Key::Char('o') => self.mode = Mode::Typing(self.custom_text()),
            Key::Char('s') => {
                self.drafts[self.item].status = Status::Skipped;
                self.advance();
            }
            Key::Char('c') => self.mode = Mode::CancelReason(String::new()),
            Key::Char('?') => self.mode = Mode::Help(Box::new(Mode::Choosing)),
            Key::Char('q') | Key::Esc => return Action::Quit,
            _ => {}
        }
        Action::None
    }

    fn typing(&mut self, mut text: String, key: Key) -> Action {
        if edit(&mut text, key) {
            self.mode = Mode::Typing(text);
            return Action::None;
        }
        match key {
            Key::Esc => {}
            Key::Enter => {
                let text = text.trim();
                let multi = self.question().is_some_and(|q| q.multi_select);
                let optionless = self.options() == 0;
                let draft = &mut self.drafts[self.item];
                if text.is_empty() {
                    // An emptied text takes the free-text answer back; a choice made
                    // before stays.
                    draft.custom = None;
                    if draft.selected.is_empty() {
                        draft.status = Status::Open;
                    }
                    if draft.status == Status::Open && optionless {
                        self.hint = Some(Hint::EmptyAnswer);
                    }
                } else {
                    draft.custom = Some(text.to_owned());
                    if !multi {
                        // A single-select's free text replaces the choice.
                        draft.selected.clear();
                    }
                    // A multi-select's adds to the choices; the item is confirmed
                    // with Enter, as when choosing.
                    if !multi || optionless {
                        draft.status = Status::Answered;
                        self.advance();
                    }
                }
            }
            _ => self.mode = Mode::Typing(text),
        }
        Action::None
    }

    fn cancel_reason(&mut self, mut reason: String, key: Key) -> Action {
        if edit(&mut reason, key) {
            self.mode = Mode::CancelReason(reason);
            return Action::None;
        }
        match key {
            Key::Enter => return Action::Cancel(reason.trim().to_owned()),
            Key::Esc => self.enter_item(self.item),
            _ => self.mode = Mode::CancelReason(reason),
        }
        Action::None
    }

    fn review(&mut self, key: Key) -> Action {
        self.mode = Mode::Review;
        match key {
            Key::Enter => return Action::Submit(self.answers()),
            Key::Left | Key::BackTab | Key::Up | Key::Char('h') | Key::Char('k') => {
                self.enter_item(self.drafts.len().saturating_sub(1));
            }
            Key::Char('c') => self.mode = Mode::CancelReason(String::new()),
            Key::Char('?') => self.mode = Mode::Help(Box::new(Mode::Review)),
            Key::Char('q') | Key::Esc => return Action::Quit,
            _ => {}
        }
        Action::None
    }

    fn options(&self) -> usize {
        self.question().map_or(0, |q| q.options.len())
    }

    fn custom_text(&self) -> String {
        self.drafts[self.item].custom.clone().unwrap_or_default()
    }

    /// Shows question `item` with its draft as it was left.
    fn enter_item(&mut self, item: usize) {
        self.item = item.min(self.drafts.len().saturating_sub(1));
        self.detail_scroll = 0;
        let Some(question) = self.batch.questions.get(self.item) else {
            self.mode = Mode::Choosing;
            return;
        };
        let draft = &self.drafts[self.item];
        // On the first chosen option, else the first; never on a recommendation by itself.
        self.cursor = draft
            .selected
            .first()
            .and_then(|label| question.options.iter().position(|o| &o.label == label))
            .unwrap_or(0);
        self.mode = match question.options.is_empty() {
            // An optionless question goes straight to text input.
            true if draft.status != Status::Skipped => {
                Mode::Typing(draft.custom.clone().unwrap_or_default())
            }
            _ => Mode::Choosing,
        };
    }

    /// After an item is answered or skipped: the review once every item is done, else
    /// the next question, or after the last one the first still open.
    fn advance(&mut self) {
        if self.complete() {
            self.mode = Mode::Review;
        } else if self.item + 1 < self.drafts.len() {
            self.enter_item(self.item + 1);
        } else {
            let open = self.drafts.iter().position(|d| d.status == Status::Open);
            self.enter_item(open.unwrap_or(0));
        }
    }
}

/// A text input's editing keys: a character is typed, Backspace takes the last one
/// back. Whether `key` was one of them.
fn edit(text: &mut String, key: Key) -> bool {
    match key {
        Key::Char(c) => text.push(c),
        Key::Backspace => {
            text.pop();
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests;
