//! The batches waiting for this terminal, oldest first. The first one owns the
//! keyboard; the rest wait their turn behind a counter. Events from the subscription
//! come in, keys come in, and what to send to the service comes out; nothing here
//! does I/O.

use std::collections::VecDeque;

use askgate_client::Event;
use askgate_proto::v1::{CancelSource, QuestionAnswer, Resolution, Resolved};

use super::state::{Action, Key, Overlay};

/// What the caller sends to the service after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Send {
    Answer {
        session_id: String,
        rpc_id: String,
        answers: Vec<QuestionAnswer>,
    },
    Cancel {
        session_id: String,
        rpc_id: String,
        reason: String,
    },
}

/// What the caller does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    None,
    Send(Send),
    Quit,
}

struct Queued {
    overlay: Overlay,
    /// Listed again by the snapshot since the last `reset`.
    confirmed: bool,
    /// An Answer or Cancel for it is on its way.
    sending: bool,
}

#[derive(Default)]
pub struct Queue {
    batches: VecDeque<Queued>,
    /// A one-line notice: how a batch was resolved elsewhere, or the connection's state.
    pub notice: Option<String>,
    /// Between a `reset` and its `synced`: the snapshot is being listed again.
    resyncing: bool,
    /// Quorum batches this terminal approved, still pending for other approvers: not
    /// shown again when a snapshot lists them. Each with whether the snapshot being
    /// listed named it.
    approved: std::collections::HashMap<String, bool>,
}

impl Queue {
    pub fn new() -> Self {
        Self::default()
    }

    /// The batch that owns the keyboard.
    pub fn current(&self) -> Option<&Overlay> {
        self.batches.front().map(|q| &q.overlay)
    }

    /// Batches waiting behind the current one.
    pub fn waiting(&self) -> usize {
        self.batches.len().saturating_sub(1)
    }

    /// Every batch still queued, as (session_id, rpc_id).
    pub fn pending(&self) -> Vec<(String, String)> {
        self.batches
            .iter()
            .map(|q| {
                (
                    q.overlay.batch.session_id.clone(),
                    q.overlay.batch.rpc_id.clone(),
                )
            })
            .collect()
    }

    /// Whether an Answer or Cancel for the current batch is on its way.
    pub fn sending(&self) -> bool {
        self.batches.front().is_some_and(|q| q.sending)
    }

    /// Takes in an event of the subscription.
    pub fn on_event(&mut self, event: Event) {
        match event {
            Event::Requested { requested, .. } => {
                if let Some(listed) = self.approved.get_mut(&requested.rpc_id) {
                    *listed = true;
                    return;
                }
                match self
                    .batches
                    .iter_mut()
                    .find(|q| q.overlay.batch.rpc_id == requested.rpc_id)
                {
                    // Listed again after a reconnect: its drafts stay.
                    Some(queued) => queued.confirmed = true,
                    None => self.batches.push_back(Queued {
                        overlay: Overlay::new(requested),
                        confirmed: true,
                        sending: false,
                    }),
                }
            }
            Event::Resolved { resolved, .. } => self.resolved(&resolved),
            Event::Reset => {
                self.resyncing = true;
                for queued in &mut self.batches {
                    queued.confirmed = false;
                }
                for listed in self.approved.values_mut() {
                    *listed = false;
                }
            }
            Event::Approval { approval, .. }
                if self.holds(&approval.rpc_id) || self.approved.contains_key(&approval.rpc_id) =>
            {
                self.notice = Some(format!(
                    "approval {} of {} recorded, by {}",
                    approval.count, approval.needed, approval.subject
                ));
            }
            Event::Reminder { reminder, .. } if self.holds(&reminder.rpc_id) => {
                self.notice = Some(format!(
                    "reminder {}: a batch is still waiting",
                    reminder.count
                ));
            }
            Event::Escalated { escalated, .. } if self.holds(&escalated.rpc_id) => {
                self.notice = Some("escalated: a batch waited past its escalation time".into());
            }
            Event::Synced { .. } if std::mem::take(&mut self.resyncing) => {
                self.approved.retain(|_, listed| *listed);
                let before = self.batches.len();
                self.batches.retain(|q| q.confirmed);
                if self.batches.len() < before {
                    self.notice =
                        Some("resolved elsewhere while the connection was down".to_owned());
                }
            }
            _ => {}
        }
    }

    fn holds(&self, rpc_id: &str) -> bool {
        self.batches
            .iter()
            .any(|q| q.overlay.batch.rpc_id == rpc_id)
    }

    /// A batch resolved (here or elsewhere) leaves the queue; a notice says how.
    fn resolved(&mut self, resolved: &Resolved) {
        if self.approved.remove(&resolved.rpc_id).is_some() {
            self.notice = Some(match resolved.reason() {
                Resolution::Answered => format!("approved by {}", resolved.approvers.join(", ")),
                _ => resolution_notice(resolved),
            });
            return;
        }
        let at = self
            .batches
            .iter()
            .position(|q| q.overlay.batch.rpc_id == resolved.rpc_id);
        if let Some(queued) = at.and_then(|at| self.batches.remove(at))
            && !queued.sending
        {
            self.notice = Some(resolution_notice(resolved));
        }
    }

    /// Takes in a key for the current batch.
    pub fn on_key(&mut self, key: Key) -> Step {
        self.notice = None;
        let Some(queued) = self.batches.front_mut() else {
            return match key {
                Key::Char('q') | Key::Esc => Step::Quit,
                _ => Step::None,
            };
        };
        if queued.sending {
            return Step::None;
        }
        let (session_id, rpc_id) = (
            queued.overlay.batch.session_id.clone(),
            queued.overlay.batch.rpc_id.clone(),
        );
        match queued.overlay.on_key(key) {
            Action::None => Step::None,
            Action::Quit => Step::Quit,
            Action::Submit(answers) => {
                queued.sending = true;
                Step::Send(Send::Answer {
                    session_id,
                    rpc_id,
                    answers,
                })
            }
            Action::Cancel(reason) => {
                queued.sending = true;
                Step::Send(Send::Cancel {
                    session_id,
                    rpc_id,
                    reason,
                })
            }
        }
    }

    /// How an Answer or Cancel for `rpc_id` ended: done, the batch leaves the queue;
    /// lost the race (or failed), it leaves with `notice` saying why; `retry` keeps it
    /// on screen with its drafts to send again.
    pub fn sent(&mut self, rpc_id: &str, outcome: Sent) {
        let Some(at) = self
            .batches
            .iter()
            .position(|q| q.overlay.batch.rpc_id == rpc_id)
        else {
            return;
        };
        match outcome {
            Sent::Done => {
                let Some(queued) = self.batches.remove(at) else {
                    return;
                };
                // A quorum ask stays pending for its other approvers.
                if let Some(needed) = queued
                    .overlay
                    .batch
                    .quorum
                    .map(|q| q.count)
                    .filter(|n| *n > 1)
                {
                    self.approved.insert(rpc_id.to_owned(), true);
                    self.notice = Some(format!(
                        "your approval is recorded: the batch needs {needed} approvers \
                         who give the same answers"
                    ));
                }
            }
            Sent::Lost(notice) => {
                self.batches.remove(at);
                self.notice = Some(notice);
            }
            Sent::Retry(notice) => {
                self.batches[at].sending = false;
                self.notice = Some(notice);
            }
        }
    }
}

/// How a sent Answer or Cancel ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    Done,
    /// The batch is no longer pending (resolved elsewhere, or refused for good).
    Lost(String),
    /// Not delivered (the connection is down): the batch stays, to send again.
    Retry(String),
}

/// One line saying how and by whom a batch was resolved.
pub fn resolution_notice(resolved: &Resolved) -> String {
    let by = match resolved.resolved_by.as_str() {
        "" => String::new(),
        by => format!(" by {by}"),
    };
    match resolved.reason() {
        Resolution::Answered => format!("answered elsewhere{by}"),
        Resolution::Cancelled if resolved.cancel_source() == CancelSource::UiClosed => {
            match resolved.resolved_by.as_str() {
                "" => "closed unanswered: an exclusive answering UI closed".to_owned(),
                who => format!("closed unanswered: the exclusive answering UI of {who} closed"),
            }
        }
        Resolution::Cancelled => match resolved.cancel_reason.as_str() {
            "" => format!("cancelled{by}"),
            reason => format!("cancelled{by}: {reason}"),
        },
        Resolution::Aborted => "aborted: the asking agent went away".to_owned(),
        Resolution::Expired => "expired: the agent stopped waiting".to_owned(),
        Resolution::Defaulted => "nobody answered in time: its default answers apply".to_owned(),
        Resolution::Disposed => "disposed: the server shut down".to_owned(),
        Resolution::AllowedByPolicy => format!("allowed{by}"),
        Resolution::Unspecified => "resolved".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{Question, QuestionOption, Requested};

    use super::*;

    fn requested(rpc_id: &str) -> Event {
        Event::Requested {
            cursor: String::new(),
            requested: Requested {
                rpc_id: rpc_id.into(),
                session_id: "s".into(),
                questions: vec![Question {
                    id: "q".into(),
                    question: "Go?".into(),
                    options: vec![
                        QuestionOption {
                            label: "yes".into(),
                            description: None,
                        },
                        QuestionOption {
                            label: "no".into(),
                            description: None,
                        },
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    fn resolved(rpc_id: &str, reason: Resolution, by: &str) -> Event {
        Event::Resolved {
            cursor: String::new(),
            resolved: Resolved {
                rpc_id: rpc_id.into(),
                session_id: "s".into(),
                reason: reason.into(),
                resolved_by: by.into(),
                ..Default::default()
            },
        }
    }

    fn synced() -> Event {
        Event::Synced {
            cursor: String::new(),
            resumed: false,
        }
    }

    fn current_rpc(queue: &Queue) -> Option<&str> {
        queue.current().map(|o| o.batch.rpc_id.as_str())
    }

    #[test]
    fn batches_queue_oldest_first_with_a_counter() {
        let mut queue = Queue::new();
        for rpc in ["a", "b", "c"] {
            queue.on_event(requested(rpc));
        }
        queue.on_event(requested("a")); // a replay of one already queued
        assert_eq!(current_rpc(&queue), Some("a"));
        assert_eq!(queue.waiting(), 2);
        let step = queue.on_key(Key::Enter);
        assert_eq!(step, Step::None, "the one question is answered: review");
        let Step::Send(Send::Answer {
            rpc_id, answers, ..
        }) = queue.on_key(Key::Enter)
        else {
            panic!("expected an answer to send");
        };
        assert_eq!(
            (rpc_id.as_str(), answers[0].selected.clone()),
            ("a", vec!["yes".to_owned()])
        );
        assert!(queue.sending());
        assert_eq!(
            queue.on_key(Key::Down),
            Step::None,
            "keys wait while it is sent"
        );
        queue.sent("a", Sent::Done);
        assert_eq!(current_rpc(&queue), Some("b"));
        assert_eq!(queue.waiting(), 1);
        // Its own resolved event comes after and changes nothing.
        queue.on_event(resolved("a", Resolution::Answered, "me"));
        assert_eq!(queue.notice, None);
    }

    #[test]
    fn an_approval_of_a_quorum_batch_waits_for_the_other_approvers_out_of_sight() {
        let mut queue = Queue::new();
        queue.on_event(requested_quorum("a"));
        queue.on_key(Key::Enter);
        assert!(matches!(queue.on_key(Key::Enter), Step::Send(_)));
        queue.sent("a", Sent::Done);
        assert_eq!(current_rpc(&queue), None, "nothing more to do here");
        assert!(
            queue
                .notice
                .as_deref()
                .is_some_and(|n| n.contains("needs 2 approvers")),
            "{:?}",
            queue.notice
        );
        // A reconnect lists it again: it stays out of sight.
        queue.on_event(Event::Reset);
        queue.on_event(requested_quorum("a"));
        queue.on_event(synced());
        assert_eq!(current_rpc(&queue), None);
        queue.on_event(Event::Approval {
            cursor: String::new(),
            approval: askgate_proto::v1::Approval {
                rpc_id: "a".into(),
                session_id: "s".into(),
                subject: "bo".into(),
                count: 2,
                needed: 2,
                ..Default::default()
            },
        });
        assert_eq!(
            queue.notice.as_deref(),
            Some("approval 2 of 2 recorded, by bo")
        );
        let Event::Resolved {
            cursor,
            mut resolved,
        } = resolved("a", Resolution::Answered, "bo")
        else {
            unreachable!("a resolved event")
        };
        resolved.approvers = vec!["me".into(), "bo".into()];
        queue.on_event(Event::Resolved { cursor, resolved });
        assert_eq!(queue.notice.as_deref(), Some("approved by me, bo"));
        // Gone for good: a later listing shows it again only as a new batch would.
        queue.on_event(requested("a"));
        assert_eq!(current_rpc(&queue), Some("a"));
    }

    fn requested_quorum(rpc_id: &str) -> Event {
        let Event::Requested {
            cursor,
            mut requested,
        } = requested(rpc_id)
        else {
            unreachable!("a requested event")
        };
        requested.quorum = Some(askgate_proto::v1::Quorum { count: 2 });
        Event::Requested { cursor, requested }
    }

    #[test]
    fn a_batch_resolved_elsewhere_closes_with_a_notice() {
        let mut queue = Queue::new();
        queue.on_event(requested("a"));
        queue.on_event(requested("b"));
        queue.on_key(Key::Down);
        queue.on_event(resolved("a", Resolution::Answered, "alice"));
        assert_eq!(queue.notice.as_deref(), Some("answered elsewhere by alice"));
        assert_eq!(current_rpc(&queue), Some("b"));
        queue.on_event(resolved("b", Resolution::Aborted, ""));
        assert_eq!(
            queue.notice.as_deref(),
            Some("aborted: the asking agent went away")
        );
        assert_eq!(queue.current().map(|_| ()), None);
        assert_eq!(queue.on_key(Key::Char('q')), Step::Quit);
    }

    #[test]
    fn a_submit_that_loses_the_race_leaves_with_a_notice() {
        let mut queue = Queue::new();
        queue.on_event(requested("a"));
        queue.on_key(Key::Enter);
        assert!(matches!(queue.on_key(Key::Enter), Step::Send(_)));
        queue.sent("a", Sent::Lost("already answered by bob".into()));
        assert_eq!(queue.notice.as_deref(), Some("already answered by bob"));
        assert!(queue.current().is_none());
    }

    #[test]
    fn a_failed_send_keeps_the_drafts_to_send_again() {
        let mut queue = Queue::new();
        queue.on_event(requested("a"));
        queue.on_key(Key::Down);
        queue.on_key(Key::Enter);
        assert!(matches!(queue.on_key(Key::Enter), Step::Send(_)));
        queue.sent(
            "a",
            Sent::Retry("connection lost; Enter to send again".into()),
        );
        assert!(!queue.sending());
        let Step::Send(Send::Answer { answers, .. }) = queue.on_key(Key::Enter) else {
            panic!("expected the answer again");
        };
        assert_eq!(answers[0].selected, ["no"]);
    }

    #[test]
    fn cancel_sends_the_reason() {
        let mut queue = Queue::new();
        queue.on_event(requested("a"));
        queue.on_key(Key::Char('c'));
        for c in "later".chars() {
            queue.on_key(Key::Char(c));
        }
        assert_eq!(
            queue.on_key(Key::Enter),
            Step::Send(Send::Cancel {
                session_id: "s".into(),
                rpc_id: "a".into(),
                reason: "later".into()
            })
        );
    }

    #[test]
    fn drafts_survive_a_reconnect_while_the_batch_is_pending() {
        let mut queue = Queue::new();
        queue.on_event(requested("a"));
        queue.on_event(requested("b"));
        queue.on_key(Key::Down); // a draft: the cursor on "no"
        queue.on_event(Event::Reset);
        queue.on_event(requested("a"));
        queue.on_event(requested("c"));
        queue.on_event(synced());
        // b was resolved while the connection was down; a keeps its state.
        assert_eq!(current_rpc(&queue), Some("a"));
        assert_eq!(queue.current().map(|o| o.cursor), Some(1));
        assert_eq!(queue.waiting(), 1);
        assert_eq!(
            queue.notice.as_deref(),
            Some("resolved elsewhere while the connection was down")
        );
        // A plain synced (no reset) drops nothing.
        queue.on_event(synced());
        assert_eq!(queue.waiting(), 1);
    }

    #[test]
    fn notices_say_how_and_by_whom() {
        let mut cancelled = Resolved {
            reason: Resolution::Cancelled.into(),
            resolved_by: "carol".into(),
            cancel_reason: "wrong repo".into(),
            ..Default::default()
        };
        assert_eq!(
            resolution_notice(&cancelled),
            "cancelled by carol: wrong repo"
        );
        cancelled.cancel_reason.clear();
        assert_eq!(resolution_notice(&cancelled), "cancelled by carol");
        cancelled.cancel_source = CancelSource::UiClosed.into();
        assert_eq!(
            resolution_notice(&cancelled),
            "closed unanswered: the exclusive answering UI of carol closed"
        );
        let expired = Resolved {
            reason: Resolution::Expired.into(),
            ..Default::default()
        };
        assert_eq!(
            resolution_notice(&expired),
            "expired: the agent stopped waiting"
        );
    }
}
