//! Finding a repeated name in a list (question ids, option labels, an answer's
//! selection) without making the check's cost depend on what the caller sent.

use std::collections::HashSet;

/// The names of one list (question ids, a question's option labels, an answer's
/// selection) seen so far.
///
/// A list within its limit (32 by default) is compared one name against those before
/// it, which allocates nothing; a longer one, refused anyway, goes through a set, so
/// that its length cannot make the check quadratic.
pub(super) enum Seen<'a> {
    Scan,
    Set(HashSet<&'a str>),
}

impl<'a> Seen<'a> {
    pub(super) fn for_list(len: usize, limit: usize) -> Self {
        match len <= limit {
            true => Self::Scan,
            false => Self::Set(HashSet::with_capacity(len)),
        }
    }

    /// Whether `name` repeats a name before it (`earlier`). Only names that passed
    /// their own checks are asked about, and one that repeats an earlier name is as
    /// valid as it: a scan of every earlier name finds what the set of the asked ones
    /// holds.
    pub(super) fn repeated(
        &mut self,
        mut earlier: impl Iterator<Item = &'a str>,
        name: &'a str,
    ) -> bool {
        match self {
            Self::Scan => earlier.any(|e| e == name),
            Self::Set(set) => !set.insert(name),
        }
    }
}
