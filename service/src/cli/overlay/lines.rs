//! `askgate answer` without a terminal: the same queue and rules as the overlay, as
//! plain line prompts on stdout, answered by lines on stdin, so that it can be
//! scripted. A line is turned into the overlay's keys:
//!
//! - `2` chooses option 2 (single-select); `1,3` chooses options 1 and 3 (multi-select:
//!   the line is the whole selection, a number repeated counts once);
//! - `o:TEXT` answers in your own words (for a question without options, any line is
//!   the answer);
//! - `s` skips the question; `c` or `c:REASON` cancels the whole batch; `q` quits.
//!
//! A batch is submitted once its last question is answered or skipped.

use std::collections::VecDeque;

use askgate_client::{Client, Connection, Event};
use askgate_proto::v1::{Question, SubscribeRequest};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    sync::mpsc,
};
use tokio_stream::StreamExt;

use super::{
    queue::{Queue, Step},
    run::{hung_up, reject_pending, spawn_send},
    state::{Hint, Key, Mode, Overlay},
};

/// The keys a line of input stands for on `overlay`'s current question, or None when
/// the line means nothing there.
pub fn keys_of_line(overlay: &Overlay, line: &str) -> Option<Vec<Key>> {
    let line = line.trim();
    let question = overlay.question()?;
    let typed = |prefix: char, text: &str| {
        let mut keys = vec![Key::Char(prefix)];
        keys.extend(text.chars().map(Key::Char));
        keys.push(Key::Enter);
        keys
    };
    if let Mode::Typing(_) = overlay.mode {
        // A question without options: the line is the answer (or `s`, after leaving
        // the text input, skips it).
        return match line {
            "s" => Some(vec![Key::Esc, Key::Char('s')]),
            "q" => Some(vec![Key::Esc, Key::Char('q')]),
            "" => None,
            text => Some(text.chars().map(Key::Char).chain([Key::Enter]).collect()),
        };
    }
    match line {
        "s" => return Some(vec![Key::Char('s')]),
        "q" => return Some(vec![Key::Char('q')]),
        "c" => return Some(vec![Key::Char('c'), Key::Enter]),
        _ => {}
    }
    if let Some(reason) = line.strip_prefix("c:") {
        let mut keys = vec![Key::Char('c')];
        keys.extend(reason.trim().chars().map(Key::Char));
        keys.push(Key::Enter);
        return Some(keys);
    }
    if let Some(text) = line.strip_prefix("o:") {
        if text.trim().is_empty() {
            return None;
        }
        let mut keys = typed('o', text.trim());
        if question.multi_select {
            // Own words add to the choices; Enter confirms the item.
            keys.push(Key::Enter);
        }
        return Some(keys);
    }
    picked(overlay, question, line)
}

/// The keys of a line of option numbers (`2`, `1,3`): the whole selection, moving the
/// cursor from the top of the list down to each option to toggle.
fn picked(overlay: &Overlay, question: &Question, line: &str) -> Option<Vec<Key>> {
    let mut picks: Vec<usize> = Vec::new();
    for number in line.split(',') {
        let pick = number
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=question.options.len()).contains(n))?;
        // A number given twice is chosen once: the line says what is chosen.
        if !picks.contains(&pick) {
            picks.push(pick);
        }
    }
    if picks.is_empty() || (!question.multi_select && picks.len() > 1) {
        return None;
    }
    // The line is the whole selection: options chosen before (a draft kept across a
    // reconnect) that it does not name are unchosen, and those it names are chosen in
    // its order.
    let chosen = &overlay.drafts[overlay.item].selected;
    let mut toggles: Vec<usize> = Vec::new();
    if question.multi_select {
        toggles.extend(
            question
                .options
                .iter()
                .enumerate()
                .filter(|(_, o)| chosen.contains(&o.label))
                .map(|(i, _)| i),
        );
        toggles.extend(picks.iter().map(|p| p - 1));
    } else {
        toggles.push(picks[0] - 1);
    }
    // From the top of the list, down to each option to toggle.
    let mut keys = vec![Key::Up; overlay.cursor];
    let mut at = 0;
    for target in toggles {
        while at < target {
            keys.push(Key::Down);
            at += 1;
        }
        while at > target {
            keys.push(Key::Up);
            at -= 1;
        }
        if question.multi_select {
            keys.push(Key::Char(' '));
        }
    }
    keys.push(Key::Enter);
    Some(keys)
}

/// A hint in this mode's words: what a line can say here.
fn line_hint(hint: Hint) -> &'static str {
    match hint {
        Hint::NothingChosen => {
            "give option numbers like 1,3, o:TEXT for your own answer, or s to skip"
        }
        Hint::EmptyAnswer => "write your answer, or s to skip",
        Hint::ChooseToApprove => {
            "this question approves an action: give one of its option numbers (or c:REASON to cancel)"
        }
    }
}

/// The prompt for the current question: where it is, the question, its options.
fn prompt(queue: &Queue) -> Option<String> {
    let overlay = queue.current()?;
    let question = overlay.question()?;
    let mut text = format!(
        "[{}] ask {}{}\nQuestion {} of {}",
        overlay.batch.session_id,
        overlay.batch.rpc_id,
        match queue.waiting() {
            0 => String::new(),
            n => format!(" ({n} more waiting)"),
        },
        overlay.item + 1,
        overlay.drafts.len(),
    );
    if let Some(header) = &question.header {
        text.push_str(&format!(" [{header}]"));
    }
    text.push_str(&format!(": {}\n", question.question));
    if let Some(detail) = question.detail.as_deref().filter(|d| !d.is_empty()) {
        let title = match Overlay::plan_approve(question) {
            Some(_) => "The plan to review",
            None => "Detail",
        };
        text.push_str(&format!("{title}:\n{detail}\n"));
    }
    let approve = Overlay::plan_approve(question);
    for (i, option) in question.options.iter().enumerate() {
        text.push_str(&format!("  {}) {}", i + 1, option.label));
        if approve == Some(option.label.as_str()) {
            text.push_str(" [approves the plan]");
        }
        if let Some(description) = option.description.as_deref().filter(|d| !d.is_empty()) {
            text.push_str(&format!(" - {description}"));
        }
        text.push('\n');
    }
    text.push_str(match (question.options.is_empty(), question.multi_select) {
        (true, _) => "answer (your text; s skip; c:REASON cancel the batch; q quit)> ",
        (false, true) => {
            "answer (numbers like 1,3; o:TEXT your own; s skip; c:REASON cancel; q quit)> "
        }
        (false, false) => "answer (a number; o:TEXT your own; s skip; c:REASON cancel; q quit)> ",
    });
    Some(text)
}

/// Input lines read ahead of the batches that take them.
const MAX_QUEUED: usize = 1024;

/// How the line prompts ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// `q`, a signal, or stdin ended with every batch it reached answered.
    Done,
    /// stdin ended with these batches (session, rpc_id) still unanswered: a script
    /// gave fewer lines than there were questions.
    Unanswered(Vec<(String, String)>),
}

/// Runs the line prompts until stdin ends, `q`, Ctrl-C, SIGTERM or SIGHUP; with
/// `--exclusive` the batches still pending then are cancelled, as the overlay does.
///
/// Lines are queued until a batch takes them, so a script may write its answers before
/// the questions arrive. When stdin ends, the prompts wait for the session's pending
/// batches to be listed and for the lines still queued to be used; then they end, with
/// [`Ended::Unanswered`] if a batch is left without an answer.
pub async fn run(
    client: Client,
    request: SubscribeRequest,
    scope: String,
) -> anyhow::Result<Ended> {
    let exclusive = request.exclusive;
    let mut queue = Queue::new();
    let ended = prompt_loop(&client, request, &scope, &mut queue).await;
    if exclusive {
        reject_pending(&client, &queue).await;
    }
    ended
}

/// What a line did.
enum Took {
    /// Applied, or refused with a message that asks again: go on.
    Next,
    /// The line could do nothing here, and a hint says why: the question is shown
    /// again.
    Again,
    /// `q`: the prompts end.
    Quit,
}

/// Applies `line` to the current batch of `queue`, which must have one.
async fn take_line(
    client: &Client,
    queue: &mut Queue,
    line: &str,
    out: &mut tokio::io::Stdout,
    sent_tx: &mpsc::Sender<(String, super::queue::Sent)>,
) -> anyhow::Result<Took> {
    let Some(overlay) = queue.current() else {
        return Ok(Took::Next);
    };
    let Some(keys) = keys_of_line(overlay, line) else {
        let expected = match overlay.question() {
            Some(q) if q.options.is_empty() => "your answer as text, or s to skip",
            Some(q) if q.multi_select => "option numbers like 1,3, o:TEXT, s, c:REASON or q",
            _ => "one option number, o:TEXT, s, c:REASON or q",
        };
        out.write_all(format!("not an answer here ({expected}); try again> ").as_bytes())
            .await?;
        return Ok(Took::Next);
    };
    for key in keys {
        match queue.on_key(key) {
            Step::None => {}
            Step::Quit => return Ok(Took::Quit),
            Step::Send(send) => spawn_send(client.clone(), send, sent_tx.clone()),
        }
    }
    // The last question done: the batch goes at once.
    if queue.current().is_some_and(|o| o.mode == Mode::Review)
        && let Step::Send(send) = queue.on_key(Key::Enter)
    {
        spawn_send(client.clone(), send, sent_tx.clone());
    }
    // A key that could do nothing: say why, and ask again.
    if let Some(hint) = queue.current().and_then(|o| o.hint).map(line_hint) {
        out.write_all(format!("{hint}\n").as_bytes()).await?;
        return Ok(Took::Again);
    }
    Ok(Took::Next)
}

async fn prompt_loop(
    client: &Client,
    request: SubscribeRequest,
    scope: &str,
    queue: &mut Queue,
) -> anyhow::Result<Ended> {
    let mut following = client.follow(request);
    let mut connection = following.connection();
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let (sent_tx, mut sent) = mpsc::channel(16);
    // Lines read and not taken yet: a batch takes them in order once it is shown.
    let mut lines: VecDeque<String> = VecDeque::new();
    let mut input_open = true;
    // The pending batches have been listed once (the first `synced`).
    let mut listed = false;
    // What was last shown, so a prompt is printed once per change.
    let mut shown: Option<(String, usize)> = None;
    let mut shutdown = std::pin::pin!(crate::cli::shutdown_signal());
    let mut hangup = std::pin::pin!(hung_up());
    loop {
        if let Some(notice) = queue.notice.take() {
            out.write_all(format!("{notice}\n").as_bytes()).await?;
        }
        let now = queue.current().map(|o| (o.batch.rpc_id.clone(), o.item));
        if now != shown && !queue.sending() {
            if let Some(text) = prompt(queue) {
                out.write_all(text.as_bytes()).await?;
            }
            shown = now;
        }
        if queue.current().is_some() && !queue.sending() {
            if let Some(line) = lines.pop_front() {
                match take_line(client, queue, &line, &mut out, &sent_tx).await? {
                    Took::Next => {}
                    Took::Again => shown = None,
                    Took::Quit => return Ok(Ended::Done),
                }
                continue;
            }
        } else if queue.current().is_none() && lines.front().is_some_and(|l| l.trim() == "q") {
            return Ok(Ended::Done);
        }
        if !input_open && listed && lines.is_empty() && !queue.sending() {
            out.flush().await?;
            return Ok(ended(queue));
        }
        out.flush().await?;
        tokio::select! {
            // At most MAX_QUEUED lines wait: past that, stdin is read as batches take them.
            line = input.next_line(), if input_open && lines.len() < MAX_QUEUED => match line? {
                Some(line) => lines.push_back(line),
                None => input_open = false,
            },
            event = following.next() => match event {
                Some(Ok(event)) => {
                    listed |= matches!(event, Event::Synced { .. });
                    queue.on_event(event);
                }
                Some(Err(e)) => return Err(e.into()),
                None => anyhow::bail!("the subscription ended"),
            },
            changed = connection.changed() => {
                if changed.is_err() {
                    anyhow::bail!("the subscription ended");
                }
                queue.notice = connection_notice(&connection.borrow(), scope);
            }
            Some((rpc_id, outcome)) = sent.recv() => {
                queue.sent(&rpc_id, outcome);
                shown = None;
            }
            () = &mut shutdown => return Ok(Ended::Done),
            () = &mut hangup => return Ok(Ended::Done),
        }
    }
}

/// How the prompts end once input is over: done, or with the batches left unanswered.
fn ended(queue: &Queue) -> Ended {
    match queue.pending() {
        pending if pending.is_empty() => Ended::Done,
        pending => Ended::Unanswered(pending),
    }
}

/// What the prompt says when its subscription's connection changes.
fn connection_notice(connection: &Connection, scope: &str) -> Option<String> {
    match connection {
        Connection::Reconnecting(why) => Some(format!("connection lost ({why}); reconnecting…")),
        // Subscribed: questions asked from now on reach this prompt.
        Connection::Connected => Some(format!("following {scope}")),
        Connection::Connecting => None,
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::Requested;

    use super::*;

    fn overlay(labels: &[&str], multi: bool) -> Overlay {
        Overlay::new(Requested {
            rpc_id: "r".into(),
            session_id: "s".into(),
            questions: vec![crate::cli::overlay::test_question("q", labels, multi)],
            ..Default::default()
        })
    }

    fn answer_with(mut overlay: Overlay, line: &str) -> Overlay {
        for key in keys_of_line(&overlay, line).expect("an answer") {
            overlay.on_key(key);
        }
        overlay
    }

    #[test]
    fn numbers_choose_options() {
        let o = answer_with(overlay(&["a", "b", "c"], false), "2");
        assert_eq!(o.answers()[0].selected, ["b"]);
        let o = answer_with(overlay(&["a", "b", "c"], true), "3, 1");
        assert_eq!(o.answers()[0].selected, ["c", "a"]);
        assert_eq!(
            keys_of_line(&overlay(&["a"], false), "2"),
            None,
            "no option 2"
        );
        assert_eq!(
            keys_of_line(&overlay(&["a", "b"], false), "1,2"),
            None,
            "one only"
        );
    }

    #[test]
    fn a_repeated_number_never_unchooses() {
        let o = answer_with(overlay(&["a", "b", "c"], true), "1,2,1");
        assert_eq!(o.answers()[0].selected, ["a", "b"]);
        let o = answer_with(overlay(&["a", "b", "c"], true), "1,1");
        assert_eq!(o.answers()[0].selected, ["a"]);
        let o = answer_with(overlay(&["a", "b"], false), "2,2");
        assert_eq!(o.answers()[0].selected, ["b"], "one option, named twice");
    }

    #[test]
    fn a_line_is_the_whole_selection_whatever_was_chosen_before() {
        let mut o = overlay(&["a", "b", "c"], true);
        // A draft kept from before: b chosen.
        o.on_key(Key::Down);
        o.on_key(Key::Char(' '));
        let o = answer_with(o, "3,1");
        assert_eq!(o.answers()[0].selected, ["c", "a"]);
    }

    #[test]
    fn empty_own_words_are_not_an_answer_and_hints_name_line_keys() {
        assert_eq!(keys_of_line(&overlay(&["a"], false), "o:  "), None);
        assert_eq!(keys_of_line(&overlay(&[], false), "  "), None);
        for hint in [Hint::NothingChosen, Hint::EmptyAnswer] {
            let text = line_hint(hint);
            assert!(!text.contains("Space") && !text.contains("Esc"), "{text}");
        }
    }

    #[test]
    fn own_words_skip_and_cancel() {
        let o = answer_with(overlay(&["a"], false), "o: DuckDB");
        assert_eq!(o.answers()[0].custom.as_deref(), Some("DuckDB"));
        assert!(o.answers()[0].selected.is_empty());
        let o = answer_with(overlay(&["a", "b"], true), "o:zig");
        assert_eq!(o.mode, Mode::Review, "confirmed");
        let o = answer_with(overlay(&[], false), "because");
        assert_eq!(o.answers()[0].custom.as_deref(), Some("because"));
        let o = answer_with(overlay(&["a"], false), "s");
        assert_eq!(o.mode, Mode::Review);
        let mut o = overlay(&["a"], false);
        let keys = keys_of_line(&o, "c: not now").expect("cancel");
        let last = keys.into_iter().map(|k| o.on_key(k)).last();
        assert_eq!(
            last,
            Some(super::super::state::Action::Cancel("not now".into()))
        );
    }
}
