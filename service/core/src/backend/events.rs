//! What both engines send subscribers, built one way: the messages of a subscription,
//! the cursor format, and the `requested` / `resolved` events of an ask.

use std::{collections::VecDeque, sync::Arc, time::SystemTime};

use askgate_proto::v1::{
    Requested, Reset, Resolved, SubscribeResponse, Synced, subscribe_response::Event,
};

use crate::domain::{NewAsk, Outcome, SessionKey};

/// One message of a subscription, shared by every subscriber it goes to.
pub type Message = Arc<SubscribeResponse>;

pub fn message(cursor: String, event: Event) -> Message {
    Arc::new(SubscribeResponse {
        cursor,
        event: Some(event),
    })
}

/// The session an event is about; `None` for `synced` and `reset`, which are about the
/// whole subscription.
pub fn session_of(message: &SubscribeResponse) -> Option<&str> {
    match message.event.as_ref()? {
        Event::Requested(r) => Some(&r.session_id),
        Event::Resolved(r) => Some(&r.session_id),
        Event::Reminder(r) => Some(&r.session_id),
        Event::Escalated(r) => Some(&r.session_id),
        Event::Approval(r) => Some(&r.session_id),
        Event::Synced(_) | Event::Reset(_) => None,
    }
}

/// A message as it may leave the server: a `resolved` event without its sealed
/// secret answers (for the waiting call only) and their MAC (for the audit log); the
/// message itself, not a copy, when it holds neither.
pub fn handed_out(message: Message) -> Message {
    match &message.event {
        Some(Event::Resolved(resolved))
            if !resolved.sealed_answers.is_empty() || !resolved.answers_hmac.is_empty() =>
        {
            let mut resolved = resolved.clone();
            resolved.sealed_answers.clear();
            resolved.answers_hmac.clear();
            self::message(message.cursor.clone(), Event::Resolved(resolved))
        }
        _ => message,
    }
}

/// The replay is over; `resumed` when it was only the events after the client's cursor.
pub fn synced(cursor: String, resumed: bool) -> Message {
    message(cursor, Event::Synced(Synced { resumed }))
}

/// Drop what you hold: a fresh snapshot follows. It carries no cursor.
pub fn reset() -> Message {
    message(String::new(), Event::Reset(Reset {}))
}

/// What a subscriber gets first, when it cannot resume (a first subscription, an
/// unknown cursor, or after falling behind): `reset` when it held something before,
/// the pending asks' `requested` events oldest first, then `synced` at `head` (the
/// point of the history the snapshot reflects; empty for a tenant's streams). Live
/// events follow.
pub fn snapshot_replay(
    reset_first: bool,
    pending: impl IntoIterator<Item = Message>,
    head: String,
) -> VecDeque<Message> {
    let mut replay: VecDeque<Message> = reset_first.then(reset).into_iter().collect();
    replay.extend(pending);
    replay.push_back(synced(head, false));
    replay
}

/// What a subscriber that resumes from a cursor gets first: the events it missed, then
/// `synced{resumed}` at `head`. Live events follow.
pub fn resumed_replay(
    missed: impl IntoIterator<Item = Message>,
    head: String,
) -> VecDeque<Message> {
    let mut replay: VecDeque<Message> = missed.into_iter().collect();
    replay.push_back(synced(head, true));
    replay
}

/// A cursor: `<epoch>-<seq>`, the history's epoch (a new one when the history was lost,
/// so that an old cursor gets `reset`) and the event's sequence number in it. The epoch
/// holds no `-` of its own.
pub fn cursor(epoch: &str, seq: u64) -> String {
    format!("{epoch}-{seq}")
}

/// The epoch and sequence number of a cursor a client sent (any text).
pub fn parse_cursor(cursor: &str) -> Option<(&str, u64)> {
    let (epoch, seq) = cursor.rsplit_once('-')?;
    Some((epoch, seq.parse().ok()?))
}

/// The `requested` event of a new ask; its questions and labels move into it.
pub fn requested(rpc_id: &str, ask: &mut NewAsk) -> Requested {
    Requested {
        rpc_id: rpc_id.to_owned(),
        session_id: ask.key.session_id.to_string(),
        questions: std::mem::take(&mut ask.questions),
        agent: ask.agent.clone(),
        labels: std::mem::take(&mut ask.labels),
        requested_at: Some(SystemTime::now().into()),
        expires_at: ask.expires_at.map(Into::into),
        notify: ask.notify,
        action: ask.action.take(),
        quorum: (ask.quorum > 1).then_some(askgate_proto::v1::Quorum { count: ask.quorum }),
        allowed_channels: std::mem::take(&mut ask.allowed_channels),
        approvers: ask.approvers.take(),
        escalation: std::mem::take(&mut ask.escalation),
        action_digest: std::mem::take(&mut ask.action_digest),
        default_answers: std::mem::take(&mut ask.default_answers),
        asked_by: std::mem::take(&mut ask.asked_by),
        traceparent: std::mem::take(&mut ask.traceparent),
        policy: ask.policy.take(),
    }
}

/// The `resolved` event of an outcome, stamped now.
pub fn resolved(key: &SessionKey, rpc_id: &str, outcome: &Outcome) -> Resolved {
    Resolved {
        rpc_id: rpc_id.to_owned(),
        session_id: key.session_id.to_string(),
        reason: outcome.resolution.into(),
        answers: outcome.answers.clone(),
        resolved_by: outcome.resolved_by.clone(),
        resolved_at: Some(SystemTime::now().into()),
        cancel_reason: outcome.cancel_reason.clone().unwrap_or_default(),
        cancel_source: outcome.cancel_source.into(),
        approvers: outcome.approvers.clone(),
        channel: outcome.channel.clone(),
        sealed_answers: outcome.sealed_answers.clone(),
        answers_hmac: outcome.answers_hmac.clone(),
        on_behalf_of: outcome.on_behalf_of.clone().unwrap_or_default(),
    }
}

/// The outcome a `resolved` event carries (for the call waiting on it).
pub fn outcome_of(resolved: &Resolved) -> Outcome {
    Outcome {
        resolution: resolved.reason(),
        answers: resolved.answers.clone(),
        resolved_by: resolved.resolved_by.clone(),
        cancel_reason: Some(resolved.cancel_reason.clone()).filter(|r| !r.is_empty()),
        cancel_source: resolved.cancel_source(),
        approvers: resolved.approvers.clone(),
        channel: resolved.channel.clone(),
        sealed_answers: resolved.sealed_answers.clone(),
        answers_hmac: resolved.answers_hmac.clone(),
        on_behalf_of: Some(resolved.on_behalf_of.clone()).filter(|p| !p.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A cursor from a client is any text: parsing never panics, and every cursor
        /// written reads back as written.
        #[test]
        fn cursors_parse_without_panic_and_round_trip(
            text in "\\PC{0,40}",
            epoch in "[0-9a-z]{1,20}",
            seq: u64,
        ) {
            let _ = parse_cursor(&text);
            let written = cursor(&epoch, seq);
            proptest::prop_assert_eq!(parse_cursor(&written), Some((epoch.as_str(), seq)));
        }
    }

    #[test]
    fn garbage_cursors_are_refused() {
        for bad in ["", "-", "1", "1-x", "x-"] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }

    fn kinds(replay: &VecDeque<Message>) -> Vec<&'static str> {
        replay
            .iter()
            .map(|m| match &m.event {
                Some(Event::Requested(_)) => "requested",
                Some(Event::Resolved(_)) => "resolved",
                Some(Event::Synced(s)) if s.resumed => "synced(resumed)",
                Some(Event::Synced(_)) => "synced",
                Some(Event::Reset(_)) => "reset",
                Some(Event::Reminder(_)) => "reminder",
                Some(Event::Escalated(_)) => "escalated",
                Some(Event::Approval(_)) => "approval",
                None => "none",
            })
            .collect()
    }

    #[test]
    fn replays_end_with_synced_and_a_reset_comes_first() {
        let ask = || message("e-1".into(), Event::Requested(Requested::default()));
        let replay = snapshot_replay(true, [ask(), ask()], "e-2".into());
        assert_eq!(
            kinds(&replay),
            ["reset", "requested", "requested", "synced"]
        );
        assert_eq!(replay.back().map(|m| m.cursor.as_str()), Some("e-2"));
        let first = snapshot_replay(false, [], String::new());
        assert_eq!(kinds(&first), ["synced"]);
        let resumed = resumed_replay([ask()], "e-9".into());
        assert_eq!(kinds(&resumed), ["requested", "synced(resumed)"]);
        assert_eq!(resumed.back().map(|m| m.cursor.as_str()), Some("e-9"));
    }

    #[test]
    fn an_outcome_survives_its_resolved_event() {
        let outcome = Outcome {
            resolution: askgate_proto::v1::Resolution::Cancelled,
            answers: Vec::new(),
            resolved_by: "ana".into(),
            cancel_reason: Some("not now".into()),
            cancel_source: askgate_proto::v1::CancelSource::UiClosed,
            approvers: vec!["ana".into()],
            channel: "console".into(),
            sealed_answers: "c2VhbGVk".into(),
            answers_hmac: "00ff".into(),
            on_behalf_of: Some("bo".into()),
        };
        let key = SessionKey::new("acme", "s");
        let event = resolved(&key, "r1", &outcome);
        assert_eq!(outcome_of(&event), outcome);
        let out = handed_out(message("e-1".into(), Event::Resolved(event)));
        let Some(Event::Resolved(out)) = &out.event else {
            panic!("not a resolved event: {out:?}");
        };
        assert_eq!(out.sealed_answers, "", "the sealed answers were handed out");
        assert_eq!(out.answers_hmac, "", "their MAC was handed out");
        assert_eq!(out.resolved_by, "ana");
        let plain = message("e-2".into(), Event::Reset(Reset {}));
        assert!(Arc::ptr_eq(&handed_out(plain.clone()), &plain));
    }
}
