//! `Answer` on a quorum ask (docs/approvals.md): each approver's answers are a vote;
//! the vote that completes the quorum resolves the ask ANSWERED with every approver,
//! one that differs resolves it CANCELLED naming who disagreed. The tally is the
//! engine's, in one atomic step; the final transition is a claim, first-wins.

use std::time::SystemTime;

use askgate_proto::v1::{
    Approval, CancelSource, QuestionAnswer, Requested, subscribe_response::Event,
};
use tracing::debug;

use super::{Answered, Questions};
use crate::approvals::Audit;
use crate::backend::people::{self, Standing};
use crate::domain::{
    Error, Outcome, Resolver, SessionKey, approval,
    quorum::{self, Vote, Voted},
};

impl Questions {
    /// Casts `by`'s vote of `answers` on the pending quorum ask `pending`; `standing`
    /// says whose person `by` is: votes count people.
    pub(super) async fn vote(
        &self,
        key: &SessionKey,
        pending: &Requested,
        answers: Vec<QuestionAnswer>,
        (by, standing): (&Resolver, &Standing),
        needed: u32,
    ) -> Result<Answered, Error> {
        let person = standing.person.as_ref().map(|p| p.id.clone());
        if self
            .asked_by_same_person(key, pending, by, person.as_deref())
            .await?
        {
            return Err(Error::SelfApproval);
        }
        let rpc_id = &pending.rpc_id;
        let vote = Vote {
            subject: by.subject.clone(),
            channel: by.channel.clone(),
            key: quorum::answers_key(&answers),
            person: person.unwrap_or_default(),
        };
        let record = self
            .audit
            .as_ref()
            .map(|_| Audit::vote_entry(key, pending, &answers, by));
        match self
            .backend
            .vote(key, rpc_id, vote, needed, record.clone())
            .await?
        {
            Voted::Recorded { count } => {
                if let (Some(audit), Some(record)) = (&self.audit, record) {
                    audit.vote(record).await?;
                }
                let approval = Approval {
                    rpc_id: rpc_id.clone(),
                    session_id: key.session_id.to_string(),
                    subject: by.subject.clone(),
                    count,
                    needed,
                    approved_at: Some(SystemTime::now().into()),
                };
                // The vote is recorded whether or not subscribers hear of it (the ask
                // may have resolved meanwhile).
                let noticed = self
                    .backend
                    .notify(key, rpc_id, Event::Approval(approval))
                    .await;
                debug!(%rpc_id, count, needed, noticed = matches!(noticed, Ok(Some(_))), "vote recorded");
                Ok(Answered::Voted {
                    votes: count,
                    needed,
                })
            }
            Voted::Complete(votes) => {
                // This vote completed it: its approver resolves the ask, with all of them.
                let outcome = Outcome {
                    approvers: votes.iter().map(|v| v.subject.clone()).collect(),
                    ..Outcome::answered(answers, by.clone())
                };
                self.backend.claim(key, rpc_id, outcome).await?;
                Ok(Answered::Resolved)
            }
            Voted::Disagreed(votes) => {
                let reason = Some(quorum::disagreement(&votes));
                let disagreed = CancelSource::ApproversDisagreed;
                let outcome = Outcome::cancelled_by(reason, by.clone(), disagreed);
                self.backend.claim(key, rpc_id, outcome).await?;
                Ok(Answered::Resolved)
            }
        }
    }

    /// Whether `by` (of person `person`, if known) is who asked `pending`: the same
    /// subject however spelt, or another identity of the asker's person.
    async fn asked_by_same_person(
        &self,
        key: &SessionKey,
        pending: &Requested,
        by: &Resolver,
        person: Option<&str>,
    ) -> Result<bool, Error> {
        if pending.asked_by.is_empty() {
            return Ok(false);
        }
        if approval::same_person(&pending.asked_by, &by.subject) {
            return Ok(true);
        }
        let (Some(person), Some(store)) = (person, &self.hooks) else {
            return Ok(false);
        };
        let asker = people::person_of(&**store, &key.tenant, &pending.asked_by).await?;
        Ok(asker.is_some_and(|asker| asker.id == person))
    }
}
