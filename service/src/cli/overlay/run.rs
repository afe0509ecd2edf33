//! The overlay on a real terminal: raw mode and the alternate screen, keys read on a
//! thread of their own, the subscription through `Client::follow` (which reconnects
//! and resumes), answers and cancels sent on tasks of their own so the screen never
//! waits for the network.

use std::time::Duration;

use anyhow::Context as _;
use askgate_client::{Client, Connection, Error, Reason};
use askgate_proto::v1::{CancelSource, Resolution, Resolved, SubscribeRequest};
use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use super::{
    queue::{Queue, Send, Sent, Step, resolution_notice},
    state::Key,
    view::{self, Context},
};

/// The reason an exclusive overlay gives the agent for the batches it rejects on its
/// way out.
pub const CLOSED_REASON: &str = "the answering terminal closed";

/// What the key-reading thread reports.
enum Input {
    Key(Key),
    /// Ctrl-C (raw mode turns it into a key).
    Interrupt,
    /// The terminal changed size: draw again.
    Resize,
}

/// Runs the overlay until the human quits, is interrupted, or loses the terminal.
/// With `exclusive` (the session held as its exclusive provider) the batches still
/// pending then are cancelled, so that their agents learn nobody will answer.
pub async fn run(client: Client, request: SubscribeRequest, scope: String) -> anyhow::Result<()> {
    let exclusive = request.exclusive;
    let mut queue = Queue::new();
    let mut terminal = ratatui::try_init().context("cannot take over the terminal")?;
    let ended = event_loop(&client, request, &scope, &mut queue, &mut terminal).await;
    ratatui::restore();
    if exclusive {
        reject_pending(&client, &queue).await;
    }
    ended
}

async fn event_loop(
    client: &Client,
    request: SubscribeRequest,
    scope: &str,
    queue: &mut Queue,
    terminal: &mut ratatui::DefaultTerminal,
) -> anyhow::Result<()> {
    let all_sessions = request.all_sessions;
    let mut following = client.follow(request);
    let mut connection = following.connection();
    let (inputs_tx, mut inputs) = mpsc::channel(64);
    std::thread::spawn(move || read_keys(inputs_tx));
    let (sent_tx, mut sent) = mpsc::channel(16);
    let mut shutdown = std::pin::pin!(crate::cli::shutdown_signal());
    let mut hangup = std::pin::pin!(hung_up());
    let mut status: Option<String> = Some("connecting…".to_owned());
    loop {
        let context = Context {
            scope,
            all_sessions,
            connection: status.as_deref(),
        };
        terminal
            .draw(|frame| view::draw(frame, queue, &context))
            .context("drawing the overlay")?;
        tokio::select! {
            input = inputs.recv() => match input {
                Some(Input::Key(key)) => match queue.on_key(key) {
                    Step::None => {}
                    Step::Quit => return Ok(()),
                    Step::Send(send) => spawn_send(client.clone(), send, sent_tx.clone()),
                },
                Some(Input::Resize) => {}
                // Interrupted, or the terminal is gone.
                Some(Input::Interrupt) | None => return Ok(()),
            },
            event = following.next() => match event {
                Some(Ok(event)) => queue.on_event(event),
                Some(Err(e)) => return Err(e).context("the subscription failed"),
                None => anyhow::bail!("the subscription ended"),
            },
            changed = connection.changed() => {
                if changed.is_err() {
                    anyhow::bail!("the subscription ended");
                }
                status = match &*connection.borrow() {
                    Connection::Connected => None,
                    Connection::Connecting => Some("connecting…".to_owned()),
                    Connection::Reconnecting(why) => {
                        Some(format!("connection lost ({why}); reconnecting…"))
                    }
                };
            }
            Some((rpc_id, outcome)) = sent.recv() => queue.sent(&rpc_id, outcome),
            () = &mut shutdown => return Ok(()),
            () = &mut hangup => return Ok(()),
        }
    }
}

/// Reads the terminal's keys until the receiver is gone or the terminal fails.
fn read_keys(inputs: mpsc::Sender<Input>) {
    loop {
        let input = match event::read() {
            Ok(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => {
                if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
                    Input::Interrupt
                } else {
                    match key_of(key.code) {
                        Some(key) => Input::Key(key),
                        None => continue,
                    }
                }
            }
            Ok(TermEvent::Resize(..)) => Input::Resize,
            Ok(_) => continue,
            // The terminal is gone: dropping the sender tells the loop.
            Err(_) => return,
        };
        if inputs.blocking_send(input).is_err() {
            return;
        }
    }
}

fn key_of(code: KeyCode) -> Option<Key> {
    Some(match code {
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Char(c) => Key::Char(c),
        _ => return None,
    })
}

/// Sends an answer or a cancel on a task of its own; its outcome comes back on `sent`.
pub(super) fn spawn_send(mut client: Client, send: Send, sent: mpsc::Sender<(String, Sent)>) {
    tokio::spawn(async move {
        let (rpc_id, result) = match send {
            Send::Answer {
                session_id,
                rpc_id,
                answers,
            } => {
                let result = client.answer(&session_id, &rpc_id, answers).await;
                (rpc_id, result)
            }
            Send::Cancel {
                session_id,
                rpc_id,
                reason,
            } => {
                let result = client.cancel(&session_id, &rpc_id, &reason).await;
                (rpc_id, result)
            }
        };
        let _ = sent.send((rpc_id, sent_outcome(result))).await;
    });
}

/// A lost race closes the batch with a notice saying who won; anything else leaves it
/// on screen, its drafts intact, to send again.
fn sent_outcome(result: Result<(), Error>) -> Sent {
    match result.map_err(|e| (e.reason(), e)) {
        Ok(()) => Sent::Done,
        Err((Reason::NotPending, e)) => Sent::Lost(lost_race_notice(&e)),
        // A quorum ask this subject approved before (a reconnect listed it again).
        Err((Reason::AlreadyApproved, _)) => Sent::Done,
        Err((Reason::SelfApproval, _)) => {
            Sent::Lost("you asked this yourself: another person must approve it".into())
        }
        Err((Reason::ChannelNotAllowed, _)) => Sent::Lost(
            "this batch may not be answered from the terminal: answer it in the console".into(),
        ),
        // Only its approvers may answer it: the message names them.
        Err((Reason::NotAnApprover, e)) => Sent::Lost(e.message().to_owned()),
        Err((_, e)) => Sent::Retry(format!("not sent: {e} (Enter to send again)")),
    }
}

/// "Already answered by alice", from the resolution NOT_PENDING names.
fn lost_race_notice(error: &Error) -> String {
    let resolved = Resolved {
        reason: error
            .metadata("resolution")
            .and_then(Resolution::from_str_name)
            .unwrap_or(Resolution::Unspecified)
            .into(),
        resolved_by: error.metadata("resolved_by").unwrap_or_default().to_owned(),
        ..Default::default()
    };
    match resolved.reason() {
        Resolution::Unspecified => "no longer pending".to_owned(),
        _ => format!("too late: {}", resolution_notice(&resolved)),
    }
}

/// An exclusive provider leaving: its pending batches are cancelled as `UI_CLOSED`, which
/// their agents can tell from a person's cancel (at most a few seconds are spent on it;
/// what is left then stays pending).
pub(super) async fn reject_pending(client: &Client, queue: &Queue) {
    let rejections = queue.pending().into_iter().map(|(session_id, rpc_id)| {
        let mut client = client.clone();
        async move {
            let _ = client
                .cancel_from(&session_id, &rpc_id, CLOSED_REASON, CancelSource::UiClosed)
                .await;
        }
    });
    let all = async {
        for rejection in rejections {
            rejection.await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
}

/// Completes on SIGHUP: the terminal went away.
pub(super) async fn hung_up() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hangups) = signal(SignalKind::hangup()) {
            hangups.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminal_keys_map_onto_the_overlay_keys() {
        assert_eq!(key_of(KeyCode::Char('j')), Some(Key::Char('j')));
        assert_eq!(key_of(KeyCode::BackTab), Some(Key::BackTab));
        assert_eq!(key_of(KeyCode::F(1)), None);
    }
}
