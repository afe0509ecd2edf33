//! The votes of quorum asks on Redis: kept per ask beside the session's keys (its hash
//! tag), tallied by the node with the rules every engine shares (`Votes::cast`) and
//! written back only if no other node voted meanwhile (VOTE), so that the tally is
//! one sequence whichever nodes the approvers reach. The ask's claim drops them.

use askgate_core::domain::{
    Error,
    quorum::{Vote, Voted, Votes},
};

use super::{RedisStore, SessionKeys, parse_settled, unavailable};
use askgate_core::domain::SessionKey;

/// Tallies one vote may take while other approvers keep voting first.
const MAX_ROUNDS: usize = 32;
/// How long a quorum ask's votes are kept at most: past the longest wait an ask may
/// have (`--max-wait` is at most 30 days); its claim drops them sooner.
const VOTES_TTL_MS: u64 = 31 * 24 * 3600 * 1000;

static VOTE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("../scripts/vote.lua")));

impl RedisStore {
    /// Casts `vote` on the pending quorum ask `rpc_id` of `key`.
    pub async fn vote(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        vote: Vote,
        needed: u32,
    ) -> Result<Voted, Error> {
        let keys = SessionKeys::new(key);
        let mut current = String::new();
        for _ in 0..MAX_ROUNDS {
            let mut votes: Votes = match current.is_empty() {
                true => Votes::default(),
                false => serde_json::from_str(&current)
                    .map_err(|e| Error::Internal(format!("corrupt votes in redis: {e}")))?,
            };
            let voted = votes.cast(vote.clone(), needed)?;
            let new = serde_json::to_string(&votes)
                .map_err(|e| Error::Internal(format!("encoding votes: {e}")))?;
            let reply: Vec<String> = VOTE
                .key(keys.asks())
                .key(keys.votes(rpc_id))
                .key(keys.settled())
                .arg(rpc_id)
                .arg(&current)
                .arg(&new)
                .arg(VOTES_TTL_MS)
                .invoke_async(&mut self.acked())
                .await
                .map_err(unavailable)?;
            match reply.first().map(String::as_str) {
                Some("ok") => return Ok(voted),
                Some("gone") => {
                    return Err(Error::NotPending {
                        settled: reply.get(1).and_then(|s| parse_settled(s)),
                    });
                }
                Some("moved") => current = reply.get(1).cloned().unwrap_or_default(),
                _ => return Err(Error::Internal("an unexpected VOTE reply".into())),
            }
        }
        Err(Error::BackendUnavailable(format!(
            "the votes kept changing under {MAX_ROUNDS} tallies"
        )))
    }
}
