//! What an inbound endpoint answers through: a narrow view of the questions use case,
//! which the server implements, so that an answer from a chat or a mailed link is
//! checked as every other is (first wins, allowed channels, quorum).

use std::sync::Arc;

use askgate_proto::v1::{AnswerRequest, CancelRequest, Requested};
use async_trait::async_trait;

use crate::domain::{Answered, Error, Resolver};

/// The questions use case as the channels see it.
#[async_trait]
pub trait Resolutions: Send + Sync {
    /// Answers (or votes on) the ask `request` names, as `by`.
    async fn answer(
        &self,
        tenant: &str,
        request: AnswerRequest,
        by: &Resolver,
    ) -> Result<Answered, Error>;

    /// Cancels the ask `request` names, as `by`.
    async fn cancel(
        &self,
        tenant: &str,
        request: CancelRequest,
        by: &Resolver,
    ) -> Result<(), Error>;

    /// The asks pending in a session, oldest first.
    async fn list_pending(&self, tenant: &str, session_id: String)
    -> Result<Vec<Requested>, Error>;
}

/// The handle the inbound endpoints keep.
pub type Questions = Arc<dyn Resolutions>;
