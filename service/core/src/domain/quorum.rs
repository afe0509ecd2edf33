//! Quorum asks (docs/approvals.md): an ask that resolves ANSWERED only when `needed`
//! distinct subjects gave the same normalised answers. The tally is here, once; each
//! engine keeps an ask's [`Votes`] and casts a vote on them in one atomic step (the
//! memory engine under its lock, Redis in a script), and the caller then makes the
//! final transition with a claim, which is first-wins like every other.

use askgate_proto::v1::QuestionAnswer;
use serde::{Deserialize, Serialize};

use super::Error;

/// One approver's vote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    pub subject: String,
    pub channel: String,
    /// The normalised answers, as [`answers_key`] writes them: two votes agree when
    /// their keys are equal.
    pub key: String,
    /// The id of the voter's person, when the tenant knows them: one person votes
    /// once, through whichever identity.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub person: String,
}

/// The votes cast on a quorum ask so far. `closed` once a vote completed the quorum or
/// disagreed: the ask is about to resolve, and takes no more votes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Votes {
    pub votes: Vec<Vote>,
    pub closed: bool,
}

/// What a vote came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Voted {
    /// Recorded: the ask waits for more approvers. `count` votes so far.
    Recorded { count: u32 },
    /// The quorum is complete: every vote, in order, all agreeing. The caller claims
    /// ANSWERED.
    Complete(Vec<Vote>),
    /// The last vote differs from the ones before it. The caller claims CANCELLED.
    Disagreed(Vec<Vote>),
}

impl Votes {
    /// Casts `vote` for an ask that needs `needed` approvers.
    ///
    /// A subject votes once (ALREADY_APPROVED). Once closed, the ask takes no new vote
    /// (NOT_PENDING: it is about to resolve), but a voter who asks again is told the
    /// outcome again, so that a retry after a lost reply still makes the final claim.
    pub fn cast(&mut self, vote: Vote, needed: u32) -> Result<Voted, Error> {
        // One person, however their subject is spelt (`Alice`, `alice`).
        let voted = self.votes.iter().any(|v| {
            super::approval::same_person(&v.subject, &vote.subject)
                || (!vote.person.is_empty() && v.person == vote.person)
        });
        if self.closed {
            return match voted {
                true => Ok(self.decided()),
                false => Err(Error::not_pending()),
            };
        }
        if voted {
            return Err(Error::AlreadyApproved);
        }
        self.votes.push(vote);
        let outcome = self.outcome();
        self.closed =
            !matches!(outcome, Voted::Recorded { .. }) || self.votes.len() >= needed as usize;
        Ok(match self.closed {
            true => self.decided(),
            false => outcome,
        })
    }

    /// The outcome of a closed tally: complete unless it disagreed.
    fn decided(&self) -> Voted {
        match self.outcome() {
            Voted::Recorded { .. } => Voted::Complete(self.votes.clone()),
            disagreed => disagreed,
        }
    }

    /// Disagreed when any vote's key differs from the first's; else recorded so far.
    fn outcome(&self) -> Voted {
        let first = self.votes.first().map(|v| v.key.as_str());
        if self.votes.iter().any(|v| Some(v.key.as_str()) != first) {
            return Voted::Disagreed(self.votes.clone());
        }
        Voted::Recorded {
            count: self.votes.len() as u32,
        }
    }
}

/// The key two votes are compared by: the normalised answers in question order, each
/// answer's selected labels sorted (a multi-select's order means nothing), as JSON.
pub fn answers_key(answers: &[QuestionAnswer]) -> String {
    let entries: Vec<serde_json::Value> = answers
        .iter()
        .map(|answer| {
            let mut selected = answer.selected.clone();
            selected.sort();
            serde_json::json!([answer.id, selected, answer.custom])
        })
        .collect();
    serde_json::Value::Array(entries).to_string()
}

/// The reason of a quorum ask cancelled by disagreement, naming who disagreed with
/// whom.
pub fn disagreement(votes: &[Vote]) -> String {
    let Some(first) = votes.first() else {
        return "the approvers disagreed".into();
    };
    let agreeing: Vec<&str> = votes
        .iter()
        .filter(|v| v.key == first.key)
        .map(|v| v.subject.as_str())
        .collect();
    let differing: Vec<&str> = votes
        .iter()
        .filter(|v| v.key != first.key)
        .map(|v| v.subject.as_str())
        .collect();
    format!(
        "the approvers disagreed: {} answered otherwise than {}",
        differing.join(", "),
        agreeing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(subject: &str, key: &str) -> Vote {
        Vote {
            subject: subject.into(),
            channel: "console".into(),
            key: key.into(),
            person: String::new(),
        }
    }

    #[test]
    fn a_person_votes_once_through_any_identity() {
        let mut votes = Votes::default();
        let of = |subject: &str, person: &str| Vote {
            person: person.into(),
            ..vote(subject, "A")
        };
        assert_eq!(
            votes.cast(of("ana", "p-ana"), 2),
            Ok(Voted::Recorded { count: 1 })
        );
        assert_eq!(
            votes.cast(of("ana-laptop", "p-ana"), 2),
            Err(Error::AlreadyApproved)
        );
        assert_eq!(
            votes
                .cast(of("bo", ""), 2)
                .map(|v| matches!(v, Voted::Complete(_))),
            Ok(true)
        );
    }

    #[test]
    fn the_quorum_completes_with_the_last_agreeing_vote() {
        let mut votes = Votes::default();
        assert_eq!(
            votes.cast(vote("ana", "A"), 3),
            Ok(Voted::Recorded { count: 1 })
        );
        assert_eq!(
            votes.cast(vote("bo", "A"), 3),
            Ok(Voted::Recorded { count: 2 })
        );
        let Ok(Voted::Complete(all)) = votes.cast(vote("cy", "A"), 3) else {
            panic!("complete");
        };
        assert_eq!(all.len(), 3);
        assert!(votes.closed);
    }

    #[test]
    fn a_subject_votes_once_and_a_closed_tally_takes_no_newcomer() {
        let mut votes = Votes::default();
        votes.cast(vote("ana", "A"), 2).expect("first");
        assert_eq!(votes.cast(vote("ana", "A"), 2), Err(Error::AlreadyApproved));
        assert!(matches!(
            votes.cast(vote("bo", "A"), 2),
            Ok(Voted::Complete(_))
        ));
        // A retry by a voter gets the outcome again; a newcomer gets NOT_PENDING.
        assert!(matches!(
            votes.cast(vote("bo", "A"), 2),
            Ok(Voted::Complete(_))
        ));
        assert_eq!(votes.cast(vote("cy", "A"), 2), Err(Error::not_pending()));
    }

    #[test]
    fn one_person_spelt_two_ways_votes_once() {
        let mut votes = Votes::default();
        votes.cast(vote("alice", "A"), 3).expect("first");
        assert_eq!(
            votes.cast(vote("Alice", "A"), 3),
            Err(Error::AlreadyApproved)
        );
        votes.cast(vote("email:bo@x.org", "A"), 3).expect("bo");
        assert_eq!(
            votes.cast(vote("email:Bo+2@x.org", "A"), 3),
            Err(Error::AlreadyApproved)
        );
        assert_eq!(votes.votes.len(), 2);
    }

    #[test]
    fn a_differing_vote_closes_the_tally_and_is_named() {
        let mut votes = Votes::default();
        votes.cast(vote("ana", "A"), 3).expect("first");
        let Ok(Voted::Disagreed(all)) = votes.cast(vote("bo", "B"), 3) else {
            panic!("disagreed");
        };
        assert!(votes.closed);
        assert_eq!(
            disagreement(&all),
            "the approvers disagreed: bo answered otherwise than ana"
        );
    }

    #[test]
    fn the_key_ignores_the_order_of_a_multi_select() {
        let answer = |selected: &[&str]| QuestionAnswer {
            id: "q".into(),
            selected: selected.iter().map(|s| (*s).into()).collect(),
            custom: None,
        };
        assert_eq!(
            answers_key(&[answer(&["a", "b"])]),
            answers_key(&[answer(&["b", "a"])])
        );
        assert_ne!(
            answers_key(&[answer(&["a"])]),
            answers_key(&[answer(&["b"])])
        );
    }
}
