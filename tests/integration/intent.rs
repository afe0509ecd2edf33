//! docs/protocol.md, Semantics 9, the plan-review intent: `approve` must name an option label
//! and the plan must be in `detail`; the intent reaches subscribers unchanged, and the
//! answer is an ordinary option label.

use askgate_client::{Ask, Event, Reason, answer, question};
use tonic::Code;

use crate::support::{TestServer, next_event, subscribed, within};

const PLAN: &str = "1. add the column\n2. backfill\n3. switch reads";

async fn rule_9_bad_intent_when_approve_is_no_option_label() {
    let server = TestServer::start().await;
    let review = question("plan", "Apply this migration?")
        .choice("Approve")
        .choice("Revise")
        .detail(PLAN)
        .plan_review("Ship it");
    let err = server
        .client()
        .await
        .ask(Ask::new("s").question(review))
        .await
        .expect_err("refused");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::BadIntent)
    );
    assert_eq!(
        err.violations()[0].0,
        "questions[0].intent.plan_review.approve"
    );
}
on_every_backend!(
    #[tokio::test]
    rule_9_bad_intent_when_approve_is_no_option_label
);

async fn rule_9_bad_intent_when_the_plan_is_missing() {
    let server = TestServer::start().await;
    let review = question("plan", "Apply this migration?")
        .choice("Approve")
        .choice("Revise")
        .plan_review("Approve");
    let err = server
        .client()
        .await
        .ask(Ask::new("s").question(review))
        .await
        .expect_err("refused");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::BadIntent)
    );
    assert_eq!(err.violations()[0].0, "questions[0].detail");
}
on_every_backend!(
    #[tokio::test]
    rule_9_bad_intent_when_the_plan_is_missing
);

async fn rule_9_a_plan_review_reaches_the_subscriber_intact_and_is_answered_with_a_label() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let review = question("plan", "Apply this migration?")
        .header("Plan")
        .option("Approve", "Run it as written")
        .option("Revise", "Tell me what to change")
        .detail(PLAN)
        .plan_review("Approve")
        .build();
    let mut asker = client.clone();
    let sent = review.clone();
    let call = tokio::spawn(async move { asker.ask(Ask::new("s").question(sent)).await });
    let Event::Requested { requested, .. } = next_event(&mut events).await else {
        panic!("expected requested");
    };
    assert_eq!(
        requested.questions,
        vec![review],
        "the question arrives unchanged"
    );
    client
        .answer(
            "s",
            &requested.rpc_id,
            vec![answer::select("plan", ["Approve"])],
        )
        .await
        .expect("answer");
    let response = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(response.answers[0].selected, ["Approve"]);
}
on_every_backend!(
    #[tokio::test]
    rule_9_a_plan_review_reaches_the_subscriber_intact_and_is_answered_with_a_label
);
