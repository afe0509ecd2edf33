//! A subscription that outlives connection failures: it reconnects with backoff and
//! resumes from its last cursor, so a UI sees each event once even across a blip.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};

use crate::{Client, Error, Event, proto::SubscribeRequest, retry};

/// Events buffered between the reconnecting task and the consumer.
const FOLLOW_BUFFER: usize = 256;

/// The events of a [`Client::follow`] subscription. It ends only after yielding an
/// error that a retry cannot fix (a bad session id, a second exclusive subscriber...),
/// or when dropped.
#[derive(Debug)]
pub struct Following {
    events_rx: mpsc::Receiver<Result<Event, Error>>,
}

impl Stream for Following {
    type Item = Result<Event, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events_rx.poll_recv(cx)
    }
}

pub(crate) fn start(client: Client, request: SubscribeRequest) -> Following {
    let (events_tx, events_rx) = mpsc::channel(FOLLOW_BUFFER);
    tokio::spawn(follow(client, request, events_tx));
    Following { events_rx }
}

async fn follow(
    mut client: Client,
    mut request: SubscribeRequest,
    events_tx: mpsc::Sender<Result<Event, Error>>,
) {
    let mut delays = retry::backoff();
    let mut reconnecting = false;
    loop {
        let failure = match client.subscribe(request.clone()).await {
            Ok(mut events) => {
                // A tenant-wide subscription cannot resume: tell the consumer to drop
                // what it holds before the fresh snapshot.
                if reconnecting
                    && request.all_sessions
                    && events_tx.send(Ok(Event::Reset)).await.is_err()
                {
                    return;
                }
                loop {
                    let next = tokio::select! {
                        () = events_tx.closed() => return,
                        next = events.next() => next,
                    };
                    match next {
                        Some(Ok(event)) => {
                            delays = retry::backoff();
                            if !request.all_sessions
                                && let Some(cursor) = event.cursor().filter(|c| !c.is_empty())
                            {
                                request.after = cursor.to_owned();
                            }
                            if events_tx.send(Ok(event)).await.is_err() {
                                return;
                            }
                        }
                        Some(Err(error)) => break Some(error),
                        // The server ended the stream (it is draining): reconnect.
                        None => break None,
                    }
                }
            }
            Err(error) => Some(error),
        };
        if let Some(error) = failure
            && !retry::is_retryable(&error)
        {
            let _ = events_tx.send(Err(error)).await;
            return;
        }
        reconnecting = true;
        let pause = delays.next().unwrap_or_default();
        tokio::select! {
            () = events_tx.closed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}
