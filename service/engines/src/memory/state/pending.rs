//! What happens to a pending ask short of its resolution: a quorum's votes, and the
//! notices (reminders, escalations, approvals) its session's subscribers get.

use askgate_core::{
    backend::{Noticed, audit::AuditEntry},
    domain::{
        Error, SessionKey,
        quorum::{Vote, Voted},
    },
};
use askgate_proto::v1::subscribe_response::Event;

use super::{Change, Inner};

impl Inner {
    /// Casts a vote on the pending quorum ask `rpc_id`, in one step under the lock; a
    /// durable engine writes a recorded vote's audit `record` in the same commit.
    pub(in crate::memory) fn vote(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        vote: Vote,
        needed: u32,
        record: Option<AuditEntry>,
    ) -> Result<Voted, Error> {
        let mut shard = self.shard(key);
        let session = shard.session_mut(key).ok_or_else(Error::not_pending)?;
        let ask = session.pending_mut(rpc_id)?;
        let votes = ask.votes.get_or_insert_with(Box::default);
        let voted = votes.cast(vote, needed)?;
        let change = || {
            vec![Change::Votes {
                key: key.clone(),
                rpc_id: rpc_id.to_owned(),
                votes: (**votes).clone(),
            }]
        };
        // A vote that completes or ends the tally is recorded by the resolution that
        // follows (its approvers, or who disagreed).
        let record = record.filter(|_| matches!(voted, Voted::Recorded { .. }));
        self.durable.record_audited(change, || record);
        Ok(voted)
    }

    pub(in crate::memory) fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: Event,
    ) -> Option<Noticed> {
        let mut shard = self.shard(key);
        let session = shard.session_mut(key)?;
        let requested = session.requested(rpc_id).ok()?.clone();
        let message = self.push(session, key, notice);
        session.publish(&message);
        Some(Noticed { message, requested })
    }
}
