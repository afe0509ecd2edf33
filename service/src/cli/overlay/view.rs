//! Draws the queue's current batch: header, question, detail (the plan to review, for a
//! plan-review intent), options with descriptions, the free-text answer, progress over
//! the batch's questions, a notice line and the keys. Reads the state, changes nothing.

use askgate_proto::v1::Question;
use askgate_server::domain::{approval, shown};
use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style, Stylize},
    text::{Line, Span, Text},
    widgets::{Block, Borders, Clear, Padding, Paragraph, Wrap},
};

use super::{
    queue::Queue,
    state::{Hint, Mode, Overlay, RECOMMENDED, Status},
};

/// What the screen says besides the queue: where it is connected and how that goes.
pub struct Context<'a> {
    /// The session followed, or "all sessions".
    pub scope: &'a str,
    /// Following every session: the title names the current batch's.
    pub all_sessions: bool,
    /// A connection problem and what is being done about it, or None while connected.
    pub connection: Option<&'a str>,
}

pub fn draw(frame: &mut Frame, queue: &Queue, context: &Context) {
    let area = frame.area();
    // The box takes the rows its batch needs (at most what the screen has); the notice
    // and the keys follow it.
    let room = area.height.saturating_sub(3);
    let mut size = queue
        .current()
        .map(|overlay| BatchSize::of(overlay, room))
        .unwrap_or_default();
    if queue
        .current()
        .is_some_and(|overlay| matches!(overlay.mode, Mode::Help(_)))
    {
        // The key table is drawn over the box: room for it.
        size.height = size.height.max(KEYS.len() as u16 + 4);
    }
    let [top, body, notice, keys, _] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(size.height.clamp(3, room.max(3))),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(title(queue, context)), top);
    let notice_line = match (context.connection, &queue.notice) {
        (Some(problem), _) => Line::from(problem.to_owned()).yellow(),
        (None, Some(notice)) => Line::from(notice.clone()).cyan(),
        (None, None) => Line::default(),
    };
    frame.render_widget(Paragraph::new(notice_line), notice);
    let Some(overlay) = queue.current() else {
        let idle =
            Paragraph::new(format!("No questions waiting on {}.", context.scope)).block(boxed());
        frame.render_widget(idle, body);
        frame.render_widget(Paragraph::new(Line::from("q quit").dim()), keys);
        return;
    };
    draw_batch(frame, overlay, queue.sending(), size.detail, body);
    frame.render_widget(Paragraph::new(key_line(overlay).dim()), keys);
    if let Mode::Help(_) = overlay.mode {
        draw_help(frame, body);
    }
}

fn title(queue: &Queue, context: &Context) -> Line<'static> {
    let mut spans = vec![
        Span::from(" askgate ").reversed(),
        Span::from(format!(" {}", context.scope)),
    ];
    if let Some(overlay) = queue.current() {
        if context.all_sessions {
            spans.push(Span::from(format!(" · session {}", overlay.batch.session_id)).bold());
        }
        spans.push(Span::from(format!(" · ask {}", overlay.batch.rpc_id)).dim());
    }
    let waiting = queue.waiting();
    if waiting > 0 {
        spans.push(Span::from(format!("  +{waiting} waiting")).bold().yellow());
    }
    Line::from(spans)
}

/// A bordered box whose content keeps one column from each side, whatever it is.
fn boxed() -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .padding(Padding::horizontal(1))
}

/// The rows a batch's box needs: borders, the question (two rows), its detail (at most
/// half the room, scrolled beyond), its options, and two for the answer and a hint.
#[derive(Debug, Default, Clone, Copy)]
struct BatchSize {
    height: u16,
    detail: u16,
}

impl BatchSize {
    fn of(overlay: &Overlay, room: u16) -> Self {
        let Some(question) = overlay.question() else {
            return Self::default();
        };
        let detail = match detail_text(overlay, question) {
            Some(detail) => {
                let lines = u16::try_from(detail.lines().count()).unwrap_or(u16::MAX);
                lines.saturating_add(2).min(room / 2)
            }
            None => 0,
        };
        let options =
            u16::try_from(option_lines(overlay, question).lines.len()).unwrap_or(u16::MAX);
        Self {
            height: (2 + 2 + 2 + detail).saturating_add(options),
            detail,
        }
    }
}

/// The detail pane's text: the question's detail, then what the batch's answer
/// approves (docs/approvals.md): the action with its arguments pretty-printed, the
/// approvers a quorum needs, the answers that apply when nobody answers in time.
fn detail_text(overlay: &Overlay, question: &Question) -> Option<String> {
    let mut parts: Vec<String> = question
        .detail
        .iter()
        .filter(|d| !d.is_empty())
        .cloned()
        .collect();
    let batch = &overlay.batch;
    // Said before anything is filled in: the server would refuse it at submit.
    if !approval::may_resolve(batch, super::OVERLAY_CHANNEL) {
        parts.insert(
            0,
            format!(
                "Only {} may answer this ask, not this terminal: answer it there.",
                batch.allowed_channels.join(", ")
            ),
        );
    }
    if let Some(action) = &batch.action {
        let arguments = shown::arguments(&action.arguments_json);
        let asked_by = match batch.asked_by.as_str() {
            "" => String::new(),
            who => format!("Asked by {who}. "),
        };
        let digest = batch.action_digest.get(..12).unwrap_or_default();
        parts.push(format!(
            "Approves {}:\n{arguments}\n{asked_by}Digest {digest}…: the signed receipt binds \
             the answer to exactly this action.",
            action.name
        ));
    }
    let terms = shown::terms(batch, |a| {
        shown::answer_words(a, str::to_owned).unwrap_or_else(|| "skipped".into())
    });
    if !terms.is_empty() {
        parts.push(shown::sentences(&terms));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

fn draw_batch(frame: &mut Frame, overlay: &Overlay, sending: bool, detail_rows: u16, area: Rect) {
    let Some(question) = overlay.question() else {
        return;
    };
    let block = boxed().title(progress(overlay));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [head, detail, options, bottom] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(detail_rows),
        Constraint::Min(1),
        Constraint::Length(2),
    ])
    .areas(inner);

    let mut heading = Vec::new();
    if let Some(header) = &question.header {
        heading.push(Span::from(format!(" {header} ")).reversed());
        heading.push(Span::from(" "));
    }
    heading.push(Span::from(question.question.clone()).bold());
    frame.render_widget(
        Paragraph::new(Line::from(heading)).wrap(Wrap { trim: false }),
        head,
    );

    if detail_rows > 0 {
        let title = match (Overlay::plan_approve(question), &overlay.batch.action) {
            (Some(_), _) => "The plan to review (PgUp/PgDn scroll)",
            (None, Some(_)) => "What the answer approves (PgUp/PgDn scroll)",
            (None, None) => "Detail (PgUp/PgDn scroll)",
        };
        let text = detail_text(overlay, question).unwrap_or_default();
        let paragraph = Paragraph::new(text)
            .block(Block::default().borders(Borders::TOP).title(title))
            .wrap(Wrap { trim: false })
            .scroll((overlay.detail_scroll, 0));
        frame.render_widget(paragraph, detail);
    }

    frame.render_widget(Paragraph::new(option_lines(overlay, question)), options);

    let draft = &overlay.drafts[overlay.item];
    let mut lines = Vec::new();
    match &overlay.mode {
        Mode::Typing(text) => lines.push(Line::from(vec![
            Span::from(answer_label(question)).bold(),
            Span::from(format!("{}▏", masked(question, text))),
        ])),
        Mode::CancelReason(reason) => lines.push(Line::from(vec![
            Span::from("Cancel the whole batch. Reason (optional): ")
                .bold()
                .red(),
            Span::from(format!("{reason}▏")),
        ])),
        _ => {
            if let Some(custom) = &draft.custom {
                lines.push(Line::from(vec![
                    Span::from(answer_label(question)).bold(),
                    Span::from(masked(question, custom)),
                ]));
            }
        }
    }
    if sending {
        lines.push(Line::from("Sending…").italic());
    } else if overlay.mode == Mode::Review {
        lines.push(
            Line::from("Every question is answered or skipped: Enter submits the batch.").green(),
        );
    } else if let Some(hint) = overlay.hint.map(Hint::keys) {
        lines.push(Line::from(hint).yellow());
    }
    frame.render_widget(Paragraph::new(lines), bottom);
}

/// What a typed answer is introduced with: a secret's says it stays hidden.
fn answer_label(question: &Question) -> &'static str {
    match question.secret {
        true => "Your secret answer (hidden; only the asking agent gets it): ",
        false => "Your answer: ",
    }
}

/// A typed answer as the screen shows it: a secret question's as one dot per
/// character, so that nobody looking over a shoulder (or at a recording) reads it.
fn masked(question: &Question, text: &str) -> String {
    match question.secret {
        true => "•".repeat(text.chars().count()),
        false => text.to_owned(),
    }
}

/// "Question 2 of 3" and where each question stands.
fn progress(overlay: &Overlay) -> Line<'static> {
    let mut spans = vec![Span::from(format!(
        " Question {} of {} ",
        overlay.item + 1,
        overlay.drafts.len()
    ))];
    for (i, draft) in overlay.drafts.iter().enumerate() {
        let mark = match draft.status {
            Status::Answered => "✓",
            Status::Skipped => "–",
            Status::Open => "·",
        };
        let span = Span::from(format!("{mark} "));
        spans.push(match i == overlay.item {
            true => span.bold(),
            false => span.dim(),
        });
    }
    Line::from(spans)
}

fn option_lines<'a>(overlay: &Overlay, question: &'a Question) -> Text<'a> {
    if question.options.is_empty() {
        return Text::from(match question.secret {
            true => {
                Line::from("(a secret: what you type is hidden, and only the asking agent gets it)")
                    .dim()
            }
            false => Line::from("(a free-text question)").dim(),
        });
    }
    let draft = &overlay.drafts[overlay.item];
    let approve = Overlay::plan_approve(question);
    let mut lines = Vec::new();
    for (i, option) in question.options.iter().enumerate() {
        let chosen = draft.selected.contains(&option.label);
        let mark = match (question.multi_select, chosen) {
            (true, true) => "[x]",
            (true, false) => "[ ]",
            (false, true) => "(•)",
            (false, false) => "( )",
        };
        let here = i == overlay.cursor && matches!(overlay.mode, Mode::Choosing | Mode::Help(_));
        let label = option
            .label
            .strip_suffix(RECOMMENDED)
            .map_or(option.label.as_str(), str::trim_end);
        let mut spans = vec![
            Span::from(if here { "› " } else { "  " }),
            Span::from(format!("{mark} ")),
            match here {
                true => Span::from(label).add_modifier(Modifier::BOLD | Modifier::REVERSED),
                false => Span::from(label),
            },
        ];
        if label.len() != option.label.len() {
            spans.push(Span::from(" "));
            spans.push(Span::styled(
                " Recommended ",
                Style::default().black().on_green(),
            ));
        }
        if approve == Some(option.label.as_str()) {
            spans.push(Span::from(" "));
            spans.push(Span::styled(
                " approves the plan ",
                Style::default().black().on_cyan(),
            ));
        }
        lines.push(Line::from(spans));
        if let Some(description) = option.description.as_deref().filter(|d| !d.is_empty()) {
            lines.push(Line::from(format!("        {description}")).dim());
        }
    }
    Text::from(lines)
}

fn key_line(overlay: &Overlay) -> Line<'static> {
    let multi = overlay.question().is_some_and(|q| q.multi_select);
    let keys = match &overlay.mode {
        Mode::Choosing if overlay.approving() && multi => {
            "↑↓ move  Space toggle  Enter confirm  ←→  c cancel  ? help  q quit  (approves an action)"
        }
        Mode::Choosing if overlay.approving() => {
            "↑↓ move  Enter choose  ←→  c cancel  ? help  q quit  (approves an action)"
        }
        Mode::Typing(_) => "type your answer  Enter save  Esc back",
        Mode::CancelReason(_) => "type a reason (optional)  Enter cancel the batch  Esc back",
        Mode::Review => "Enter submit  ← back to the questions  c cancel  ? help  q quit",
        Mode::Help(_) => "any key closes the help",
        Mode::Choosing if multi => {
            "↑↓ move  Space toggle  Enter confirm  o own words  s skip  ←→  c cancel  ? help  q quit"
        }
        Mode::Choosing => {
            "↑↓ move  Enter choose  o own words  s skip  ←→  c cancel  ? help  q quit"
        }
    };
    Line::from(keys)
}

/// The key table (also in docs/cli.md).
pub const KEYS: &[(&str, &str)] = &[
    ("↑ ↓ / k j", "move between options"),
    (
        "Enter",
        "single-select: choose and go on; multi-select: confirm the choices",
    ),
    ("Space", "multi-select: choose or unchoose the option"),
    (
        "o",
        "your own answer (replaces a single choice, adds to multiple ones)",
    ),
    ("s", "skip the question"),
    (
        "← → / h l, Tab",
        "previous / next question (drafts are kept)",
    ),
    ("Enter (all done)", "submit the batch"),
    (
        "c",
        "cancel the whole batch, with an optional reason for the agent",
    ),
    ("PgUp PgDn", "scroll the detail (the plan to review)"),
    ("?", "this help"),
    ("q / Esc", "leave; the questions stay pending for other UIs"),
];

fn draw_help(frame: &mut Frame, area: Rect) {
    let width = area.width.saturating_sub(4).min(92);
    let height = (KEYS.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::from(format!("{key:>17}  ")).bold(),
                Span::from(*what),
            ])
        })
        .collect();
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(boxed().title(" Keys ")), popup);
}

#[cfg(test)]
mod tests;
