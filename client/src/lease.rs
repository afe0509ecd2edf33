//! An agent's liveness lease (`Agents.Attach`): live while held.

use tokio_stream::StreamExt;
use tonic::{Status, Streaming};

use crate::{
    Error,
    proto::{AttachResponse, attach_response},
};

/// A held `Agents.Attach` stream. The agent is live while this value exists and the
/// stream is open; dropping it detaches the agent (its pending asks are ABORTED).
#[derive(Debug)]
pub struct AgentLease {
    incarnation: String,
    stream: Streaming<AttachResponse>,
}

impl AgentLease {
    pub(crate) async fn start(mut stream: Streaming<AttachResponse>) -> Result<Self, Error> {
        match stream.next().await {
            Some(Ok(AttachResponse {
                msg: Some(attach_response::Msg::Lease(lease)),
            })) => Ok(Self {
                incarnation: lease.incarnation,
                stream,
            }),
            Some(Err(status)) => Err(status.into()),
            _ => Err(Status::internal("Attach did not start with a lease").into()),
        }
    }

    /// The incarnation to name in asks.
    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    /// Waits until the lease ends: the server replaced it (a newer attach of the same
    /// agent), drained, or the connection broke. Heartbeats are consumed meanwhile.
    pub async fn ended(&mut self) -> Option<Error> {
        loop {
            match self.stream.next().await {
                Some(Ok(_heartbeat)) => continue,
                Some(Err(status)) => return Some(status.into()),
                None => return None,
            }
        }
    }
}
