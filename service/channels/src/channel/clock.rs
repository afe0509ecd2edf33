//! Wall-clock milliseconds, the unit the hook store keeps its times in.

use std::time::{Duration, SystemTime};

pub use askgate_core::clock::now_ms;

pub fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

pub fn timestamp(ms: u64) -> prost_types::Timestamp {
    (SystemTime::UNIX_EPOCH + Duration::from_millis(ms)).into()
}
