//! Size limits on what a caller may store. Enforced before anything is stored, so an
//! oversize request costs the server nothing but its decoding.

/// Bounds on requests. The defaults are generous for humans and tight enough that one
/// caller cannot make the server hold megabytes per question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Questions in one ask.
    pub max_questions: usize,
    /// Options in one question.
    pub max_options: usize,
    /// Bytes of a question's id, an option's label, a header.
    pub max_label_bytes: usize,
    /// Bytes of a question text, an option description, a label value.
    pub max_text_bytes: usize,
    /// Bytes of a question's `detail` (a plan under review can be long).
    pub max_detail_bytes: usize,
    /// Bytes of a free-text answer.
    pub max_custom_bytes: usize,
    /// Entries in an ask's `labels` map.
    pub max_labels: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_questions: 32,
            max_options: 32,
            max_label_bytes: 256,
            max_text_bytes: 4 * 1024,
            max_detail_bytes: 64 * 1024,
            max_custom_bytes: 16 * 1024,
            max_labels: 32,
        }
    }
}
