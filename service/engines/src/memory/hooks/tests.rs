use std::sync::Arc;

use super::*;
use askgate_core::backend::hooks::conformance::{LIMITS, Made};

async fn make() -> Made {
    (Arc::new(MemoryHookStore::new(LIMITS)), Box::new(()))
}

askgate_core::hook_store_conformance_suite!(make);
