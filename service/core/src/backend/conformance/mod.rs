//! The backend conformance suite: the semantics every [`Backend`] must meet (docs/protocol.md
//! "Semantics" 1-6), written once against the trait as generic functions, and stamped
//! into `#[tokio::test]`s per engine by [`backend_conformance_suite!`]. The integration
//! tests check the same rules end to end through gRPC; these pin them at the trait,
//! where a new backend is built.

use std::{future::Future, sync::Arc, time::Duration};

use askgate_proto::v1::{
    AgentRef, Question, QuestionAnswer, Resolution, Unattended, subscribe_response::Event,
};
use tokio_stream::StreamExt;

use crate::backend::{Backend, EventStream, Scope, StateConfig, SubscribeOptions};
use crate::domain::{Error, NewAsk, Outcome, SessionKey, Settled};

/// A backend under test and a guard that keeps what it needs (a Redis server) alive.
pub type Made = (Arc<dyn Backend>, Box<dyn std::any::Any + Send>);

/// Makes an engine's backend with the suite's sizes (`StateConfig`, mapped by the
/// engine to its own settings): an async fn of the engine's tests.
pub trait Make: Copy {
    fn make(self, config: StateConfig) -> impl Future<Output = Made>;
}

impl<F, Fut> Make for F
where
    F: Fn(StateConfig) -> Fut + Copy,
    Fut: Future<Output = Made>,
{
    fn make(self, config: StateConfig) -> impl Future<Output = Made> {
        self(config)
    }
}

/// Stamps the suite into an engine's tests: one `#[tokio::test]` per rule, calling the
/// rule's function with `$make`, an async fn of the calling module.
#[macro_export]
macro_rules! backend_conformance_suite {
    ($make:ident) => {
        mod conformance {
            $crate::__stamp_backend_conformance!(
                super::$make;
                register_stores_then_broadcasts_and_a_claim_wins_once,
                adversarial_tenant_and_session_pairs_share_nothing,
                per_tenant_caps_on_sessions_agents_and_all_sessions_streams,
                concurrent_claims_have_exactly_one_winner,
                replay_is_oldest_first_with_the_original_ids,
                a_held_cursor_resumes_and_an_unknown_one_resets,
                a_lagging_subscriber_gets_reset_and_the_snapshot,
                one_exclusive_subscriber_per_session,
                the_pending_limit_is_per_session,
                dispose_resolves_everything_and_ends_every_stream,
                rule_7_only_the_live_incarnation_may_ask,
                a_lease_belongs_to_its_subject,
                rule_7_a_child_of_a_live_parent_is_delegated,
                rule_8_fail_needs_a_subscriber_now_or_within_the_grace,
                rule_10_a_retry_joins_the_pending_ask_then_gets_the_recorded_outcome,
                rule_10_a_retry_finds_its_ask_whoever_follows,
                rule_10_a_retry_finds_its_ask_at_a_full_tenant,
                rule_10_a_request_id_names_one_ask,
                rule_10_an_abandoned_ask_is_aborted,
                an_abort_that_overtakes_its_ask_ends_it_unseen,
                budgets_are_held_per_tenant_and_given_back,
                pending_bytes_are_budgeted_per_session_and_tenant,
                quorum_votes_are_one_tally,
            );
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_backend_conformance {
    ($make:expr; $($name:ident,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::backend::conformance::$name($make).await;
            }
        )*
    };
}

mod agents;
mod semantics;
mod tenancy;

pub use agents::*;
pub use semantics::*;
pub use tenancy::*;

async fn backend(make: impl Make, config: StateConfig) -> Made {
    make.make(config).await
}

async fn default_backend(make: impl Make) -> Made {
    backend(make, StateConfig::default()).await
}

fn key(session: &str) -> SessionKey {
    SessionKey::new("tenant", session)
}

fn ask(session: &str) -> NewAsk {
    NewAsk::new(
        key(session),
        vec![Question {
            id: "q".into(),
            question: "ok?".into(),
            ..Default::default()
        }],
    )
}

fn ask_with(session: &str, change: impl FnOnce(&mut NewAsk)) -> NewAsk {
    let mut ask = ask(session);
    change(&mut ask);
    ask
}

fn agent(agent_id: &str, incarnation: &str) -> Option<AgentRef> {
    Some(AgentRef {
        agent_id: agent_id.into(),
        incarnation: incarnation.into(),
    })
}

fn answered() -> Outcome {
    Outcome::answered(
        vec![QuestionAnswer {
            id: "q".into(),
            ..Default::default()
        }],
        "tester",
    )
}

async fn subscribe(backend: &Arc<dyn Backend>, session: &str) -> EventStream {
    backend
        .subscribe(Scope::Session(key(session)), SubscribeOptions::default())
        .await
        .expect("subscribe")
}

async fn next(stream: &mut EventStream) -> Event {
    let message = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream ended")
        .expect("the stream failed");
    message.event.clone().expect("an event")
}

/// Events up to `synced`, and whether it resumed.
async fn replay(stream: &mut EventStream) -> (Vec<Event>, bool) {
    let mut events = Vec::new();
    loop {
        match next(stream).await {
            Event::Synced(s) => return (events, s.resumed),
            event => events.push(event),
        }
    }
}

fn requested_ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Requested(r) => Some(r.rpc_id.clone()),
            _ => None,
        })
        .collect()
}

/// A credential's subject, as the lease checks see it.
fn holder(subject: &str) -> crate::backend::Holder {
    crate::backend::Holder {
        subject: subject.into(),
        may_take_over: false,
    }
}
