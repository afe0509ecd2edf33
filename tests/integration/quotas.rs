//! Quotas and limits, each enforced before anything is stored: questions, options and
//! text per ask, pending asks per session and per tenant, subscribers per session, and
//! the per-tenant Ask rate.

use std::time::Duration;

use askgate_client::{Ask, Client, Reason, question};
use askgate_server::questions::AskRate;
use askgate_server::server::AskConfig;
use askgate_server::{ServerConfig, backend::StateConfig, domain::Limits};
use tonic::Code;

use crate::support::{TestServer, test_config, until_synced};

/// An ask that is admitted (held, nobody needs to follow the session) and then
/// expires at once, or is refused.
fn held(session: &str) -> Ask {
    Ask::new(session)
        .question(question("q", "ok?"))
        .hold_unattended()
        .timeout(Duration::from_millis(20))
        .no_retry()
}

/// A held ask that stays pending (until the test ends).
fn pending(client: &Client, session: &str) -> tokio::task::JoinHandle<()> {
    let mut client = client.clone();
    let ask = Ask::new(session)
        .question(question("q", "ok?"))
        .hold_unattended()
        .no_retry();
    tokio::spawn(async move {
        let _ = client.ask(ask).await;
    })
}

async fn wait_pending(client: &Client, session: &str, count: usize) {
    crate::support::eventually("the asks to be pending", || {
        let mut client = client.clone();
        async move { (client.list_pending(session).await.ok()?.len() == count).then_some(()) }
    })
    .await;
}

async fn per_ask_sizes() {
    let server = TestServer::start_with(ServerConfig {
        limits: Limits {
            max_options: 2,
            max_text_bytes: 10,
            ..Limits::default()
        },
        ..test_config()
    })
    .await;
    let mut client = server.client().await;
    let three_options =
        Ask::new("s").question(question("q", "ok?").choice("a").choice("b").choice("c"));
    let err = client
        .ask(three_options)
        .await
        .expect_err("too many options");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::BadRequest)
    );
    assert_eq!(err.violations()[0].0, "questions[0].options");
    let long = Ask::new("s").question(question("q", "a question longer than ten bytes"));
    let err = client.ask(long).await.expect_err("too long");
    assert_eq!(err.violations()[0].0, "questions[0].question");
}
on_every_backend!(
    #[tokio::test]
    per_ask_sizes
);

async fn pending_asks_per_tenant() {
    let server = TestServer::start_with(ServerConfig {
        settings: StateConfig {
            max_pending_per_tenant: 2,
            ..StateConfig::default()
        },
        ..test_config()
    })
    .await;
    let client = server.client().await;
    let _first = pending(&client, "a");
    let _second = pending(&client, "b");
    wait_pending(&client, "a", 1).await;
    wait_pending(&client, "b", 1).await;
    let err = client
        .clone()
        .ask(held("c"))
        .await
        .expect_err("over the tenant's limit");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::ResourceExhausted, Reason::TooManyPending)
    );
    assert!(err.message().contains("per tenant"), "{}", err.message());
}
on_every_backend!(
    #[tokio::test]
    pending_asks_per_tenant
);

async fn subscribers_per_session() {
    let server = TestServer::start_with(ServerConfig {
        settings: StateConfig {
            max_subscribers_per_session: 2,
            ..StateConfig::default()
        },
        ..test_config()
    })
    .await;
    let mut client = server.client().await;
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut events = client.subscribe_session("s").await.expect("subscribe");
        until_synced(&mut events).await;
        kept.push(events);
    }
    let err = client
        .subscribe_session("s")
        .await
        .expect_err("a third subscriber");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::ResourceExhausted, Reason::TooManySubscribers)
    );
    client
        .subscribe_session("t")
        .await
        .expect("another session has its own allowance");
}
on_every_backend!(
    #[tokio::test]
    subscribers_per_session
);

async fn the_ask_rate_per_tenant() {
    let server = TestServer::start_with(ServerConfig {
        asks: AskConfig {
            rate: AskRate {
                per_second: 1,
                burst: 2,
            },
            ..test_config().asks
        },
        ..test_config()
    })
    .await;
    let mut client = server.client().await;
    // Two asks are admitted within the burst, and stay pending: the third comes while
    // the allowance is still spent (a token comes back after a second; two asks that
    // each waited to expire took most of that second on a loaded cluster).
    let _held = [pending(&client, "s"), pending(&client, "s")];
    wait_pending(&client, "s", 2).await;
    let err = client.ask(held("s")).await.expect_err("rate limited");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::ResourceExhausted, Reason::RateLimited)
    );
    // An Abort may record an outcome for an ask not yet asked: it spends the same
    // allowance, so that aborts of made-up request ids cannot fill the store.
    let err = client
        .abort("s", "never-asked")
        .await
        .expect_err("rate limited");
    assert_eq!(err.reason(), Reason::RateLimited);
}
on_every_backend!(
    #[tokio::test]
    the_ask_rate_per_tenant
);
