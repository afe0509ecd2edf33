//! Each node's compiled copies of its tenants' policy sets. An ask with an action
//! reads its tenant's copy; a copy older than [`FRESH_FOR`] is checked against the
//! stored set's version first (one read, cheap on every engine), and compiled again
//! only when a put changed it: a put on any node of a Redis deployment reaches every
//! node within [`FRESH_FOR`] of its next ask.

use std::{collections::HashMap, sync::Arc, time::Duration};

use askgate_core::{
    backend::hooks::{HookStore, records::Mode},
    domain::Error,
};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::Policies;

/// How old a node's copy may be before the stored version is read again.
pub const FRESH_FOR: Duration = Duration::from_millis(500);

/// Tenants whose copies a node keeps at most; past it, the copies start over (each is
/// read again at its tenant's next ask).
const MAX_TENANTS: usize = 10_000;

/// A tenant's policy set, compiled.
pub struct Compiled {
    /// The set's policies, or why the stored set no longer compiles (it was valid when
    /// put: another askgate's Cedar may read it otherwise). Every ask is then asked.
    pub policies: Result<Policies, String>,
    pub mode: Mode,
    pub version: u64,
}

/// What a node knows of one tenant's set.
struct Copy {
    version: u64,
    checked: Instant,
    /// None: the tenant has no policies (never put, or put empty).
    compiled: Option<Arc<Compiled>>,
}

/// The node's copies, by tenant.
pub struct PolicyBook {
    store: Arc<dyn HookStore>,
    copies: Mutex<HashMap<Arc<str>, Copy>>,
}

impl PolicyBook {
    pub fn new(store: Arc<dyn HookStore>) -> Self {
        Self {
            store,
            copies: Mutex::default(),
        }
    }

    /// The tenant's policies as they stand (at most [`FRESH_FOR`] behind a put on
    /// another node); None when it has none.
    pub async fn current(&self, tenant: &Arc<str>) -> Result<Option<Arc<Compiled>>, Error> {
        if let Some(copy) = self.copies.lock().get(tenant)
            && copy.checked.elapsed() < FRESH_FOR
        {
            return Ok(copy.compiled.clone());
        }
        let version = self.store.policies_version(tenant).await?;
        if let Some(copy) = self.copies.lock().get_mut(tenant)
            && copy.version == version
        {
            copy.checked = Instant::now();
            return Ok(copy.compiled.clone());
        }
        let set = self.store.policies(tenant).await?;
        let (version, compiled) = match set {
            None => (0, None),
            Some(set) if set.text.trim().is_empty() => (set.version, None),
            Some(set) => {
                let policies = Policies::new(&set.text, &set.schema).inspect_err(|e| {
                    tracing::error!(%tenant, version = set.version, "a stored policy set does not compile; asking about everything: {e}");
                });
                let compiled = Compiled {
                    policies,
                    mode: set.mode,
                    version: set.version,
                };
                (set.version, Some(Arc::new(compiled)))
            }
        };
        self.keep(tenant.clone(), version, compiled.clone());
        Ok(compiled)
    }

    /// Takes a set this node just stored (compiled already), so that its next ask
    /// needs no read.
    pub fn installed(&self, tenant: Arc<str>, version: u64, compiled: Option<Arc<Compiled>>) {
        self.keep(tenant, version, compiled);
    }

    fn keep(&self, tenant: Arc<str>, version: u64, compiled: Option<Arc<Compiled>>) {
        let mut copies = self.copies.lock();
        if copies.len() >= MAX_TENANTS && !copies.contains_key(&tenant) {
            copies.clear();
        }
        // A slower reader must not put back an older copy than one kept meanwhile.
        if copies.get(&tenant).is_some_and(|c| c.version > version) {
            return;
        }
        copies.insert(
            tenant,
            Copy {
                version,
                checked: Instant::now(),
                compiled,
            },
        );
    }
}
