use std::sync::Arc;

use super::*;
use askgate_core::{
    backend::hooks::conformance::{LIMITS, Test},
    hook_store_conformance,
};

async fn on_each(test: Test) {
    let store = Arc::new(MemoryHookStore::new(LIMITS));
    test(store)
        .await
        .expect("the memory store keeps the contract");
}

hook_store_conformance!(on_each);
