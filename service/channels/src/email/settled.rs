//! How an ask ended, kept in words for the pages of its mailed links opened later (the
//! engine forgets a resolved ask once its session goes idle): written when the
//! follow-up mail goes out, and by a link's page when it answers.

use askgate_proto::v1::{Requested, Resolved};
use tracing::warn;

use crate::channel::chat;

/// How long a spent link is remembered: past any link's life.
pub const USED_TTL_MS: u64 = 8 * 24 * 3600 * 1000;

/// The note that keeps how an ask ended, in words, for the pages of its links opened
/// later (the engine forgets a resolved ask once its session goes idle).
pub(crate) fn settled_key(tenant: &str, rpc_id: &str) -> String {
    format!("link-settled:{tenant}:{rpc_id}")
}

/// Bytes of one line kept of how an ask ended, and lines kept: an ask's own words
/// (its questions, a person's answer) are cut to that.
const MAX_SETTLED_LINE: usize = 300;
const MAX_SETTLED_LINES: usize = 33;

/// Keeps how the ask `rpc_id` of `tenant` ended, in `lines` (cut to a bounded size),
/// for the pages of its links opened later; the first word kept stays.
pub async fn remember_settled(
    store: &dyn crate::backend::hooks::HookStore,
    tenant: &str,
    rpc_id: &str,
    lines: &[String],
) {
    let words: Vec<String> = lines
        .iter()
        .take(MAX_SETTLED_LINES)
        .map(|line| chat::cut(&line.replace('\n', " "), MAX_SETTLED_LINE))
        .collect();
    let key = settled_key(tenant, rpc_id);
    if let Err(e) = store
        .put_note(&key, &words.join("\n"), USED_TTL_MS, true)
        .await
    {
        warn!("noting how an ask ended failed: {e}");
    }
}

/// How an ask ended, in lines for a page: who resolved it and how, then what each
/// question was answered (never a secret).
pub fn settled_lines(requested: &Requested, resolved: &Resolved) -> Vec<String> {
    // "Answered by ana." as "Too late: answered by ana.", as a page's own words say it.
    let outcome = chat::outcome(resolved);
    let mut chars = outcome.chars();
    let first = chars.next().map(|c| c.to_lowercase().to_string());
    let mut lines = vec![format!(
        "Too late: {}{}",
        first.unwrap_or_default(),
        chars.as_str()
    )];
    lines.extend(chat::answered_lines(requested, &resolved.answers));
    lines
}
