//! A subscription that outlives connection failures: it reconnects with backoff and
//! resumes from its last cursor, so a UI sees each event once even across a blip.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use tokio::sync::{mpsc, watch};
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
    connection: watch::Receiver<Connection>,
}

/// Where a [`Following`] subscription stands, for a status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// The first subscription is being made.
    Connecting,
    /// Subscribed: events flow.
    Connected,
    /// The subscription was lost and is being made again (with backoff); why it was
    /// lost.
    Reconnecting(String),
}

impl Following {
    /// The subscription's state, as it changes.
    pub fn connection(&self) -> watch::Receiver<Connection> {
        self.connection.clone()
    }
}

impl Stream for Following {
    type Item = Result<Event, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events_rx.poll_recv(cx)
    }
}

pub(crate) fn start(client: Client, request: SubscribeRequest) -> Following {
    let (events_tx, events_rx) = mpsc::channel(FOLLOW_BUFFER);
    let (connection_tx, connection) = watch::channel(Connection::Connecting);
    tokio::spawn(follow(client, request, events_tx, connection_tx));
    Following {
        events_rx,
        connection,
    }
}

async fn follow(
    mut client: Client,
    mut request: SubscribeRequest,
    events_tx: mpsc::Sender<Result<Event, Error>>,
    connection: watch::Sender<Connection>,
) {
    let mut delays = retry::backoff();
    let mut reconnecting = false;
    loop {
        let failure = match client.subscribe(request.clone()).await {
            Ok(mut events) => {
                connection.send_replace(Connection::Connected);
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
        let why = match failure {
            Some(error) if !error.retryable() => {
                let _ = events_tx.send(Err(error)).await;
                return;
            }
            Some(error) => error.to_string(),
            None => "the server ended the subscription".to_owned(),
        };
        connection.send_replace(Connection::Reconnecting(why));
        reconnecting = true;
        let pause = delays.next().unwrap_or_default();
        tokio::select! {
            () = events_tx.closed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}
