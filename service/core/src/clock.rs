//! Wall-clock milliseconds since the Unix epoch: the unit stores keep times in (Redis
//! scores, the hook store's records, the sqlite store's expiries).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now.
pub fn now_ms() -> u64 {
    epoch_ms(SystemTime::now())
}

/// `at`; 0 before the epoch.
pub fn epoch_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
