//! First wins: 32 concurrent Answer/Cancel calls race on one rpc, 200 times over.
//! Exactly one succeeds, the rest get NOT_PENDING, and the Ask (and every subscriber)
//! sees exactly the winner's outcome.

use std::sync::Arc;

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::Resolution;
use tokio::sync::Barrier;

use crate::support::{TestServer, next_event, next_requested, subscribed, within};

const RACERS: usize = 32;
const ROUNDS: usize = 200;

/// What each racer does: even ones answer, odd ones cancel, each with its own text.
fn racer_text(i: usize) -> String {
    format!("racer-{i}")
}

async fn exactly_one_resolution_wins_each_race() {
    let server = TestServer::start().await;
    // Several connections so the racers really run in parallel.
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(server.client().await);
    }
    let mut ui = clients[0].clone();
    let mut events = subscribed(&mut ui, "race").await;

    for round in 0..ROUNDS {
        let mut asker = clients[1].clone();
        let waiting = tokio::spawn(async move {
            asker
                .ask(Ask::new("race").question(question("q", "free text?")))
                .await
        });
        let rpc_id = next_requested(&mut events).await;

        let barrier = Arc::new(Barrier::new(RACERS));
        let racers: Vec<_> = (0..RACERS)
            .map(|i| {
                let mut client: Client = clients[i % clients.len()].clone();
                let (rpc_id, barrier) = (rpc_id.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let text = racer_text(i);
                    match i % 2 {
                        0 => {
                            client
                                .answer("race", &rpc_id, vec![answer::custom("q", &text)])
                                .await
                        }
                        _ => client.cancel("race", &rpc_id, &text).await,
                    }
                })
            })
            .collect();
        let mut winners = Vec::new();
        for (i, racer) in racers.into_iter().enumerate() {
            match within("a racer", racer).await.expect("join") {
                Ok(()) => winners.push(i),
                Err(e) => assert_eq!(
                    e.reason(),
                    Reason::NotPending,
                    "round {round} racer {i}: {e}"
                ),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let winner = winners[0];
        let expected = racer_text(winner);

        let outcome = within("the ask", waiting).await.expect("join");
        let resolved = loop {
            if let Event::Resolved { resolved, .. } = next_event(&mut events).await {
                break resolved;
            }
        };
        assert_eq!(resolved.rpc_id, rpc_id);
        match winner % 2 {
            0 => {
                let response = outcome.expect("the winner answered");
                assert_eq!(
                    response.answers[0].custom.as_deref(),
                    Some(expected.as_str())
                );
                assert_eq!(resolved.reason(), Resolution::Answered);
                assert_eq!(resolved.answers, response.answers);
            }
            _ => {
                let err = outcome.expect_err("the winner cancelled");
                assert_eq!(err.reason(), Reason::AskCancelled);
                assert_eq!(err.metadata("reason"), Some(expected.as_str()));
                assert_eq!(resolved.reason(), Resolution::Cancelled);
                assert_eq!(resolved.cancel_reason, expected);
            }
        }
    }
}
on_every_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    exactly_one_resolution_wins_each_race
);
