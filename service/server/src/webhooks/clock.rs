//! Wall-clock milliseconds, the unit the hook store keeps its times in.

use std::time::{Duration, SystemTime};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

pub fn timestamp(ms: u64) -> prost_types::Timestamp {
    (SystemTime::UNIX_EPOCH + Duration::from_millis(ms)).into()
}
