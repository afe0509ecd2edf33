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
}

impl Hint {
    /// The hint in the overlay's keys.
    pub fn keys(self) -> &'static str {
        match self {
            Self::NothingChosen => "choose with Space, o for your own answer, s to skip",
            Self::EmptyAnswer => "type an answer, or Esc then s to skip",
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
mod tests {
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

        const VECTORS: &str = include_str!("../../../../tests/composer/vectors.json");

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
}
