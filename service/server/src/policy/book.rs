//! Each node's copies of its tenants' policy sets (compiled) and standing grants. An
//! ask with an action reads its tenant's copies; a copy older than [`FRESH_FOR`] is
//! checked against the stored version first (one read, cheap on every engine), and
//! read again only when a change moved it: a put or a grant on any node of a Redis
//! deployment reaches every node within [`FRESH_FOR`] of its next ask.

use std::{collections::HashMap, future::Future, sync::Arc, time::Duration};

use askgate_core::{
    backend::hooks::{
        HookStore,
        records::{GrantRecord, Mode},
    },
    clock::now_ms,
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

/// The node's copies, by tenant.
pub struct PolicyBook {
    store: Arc<dyn HookStore>,
    /// None: the tenant has no policies (never put, or put empty).
    sets: Copies<Option<Arc<Compiled>>>,
    /// The tenant's grants that had not expired when they were read.
    grants: Copies<Arc<Vec<GrantRecord>>>,
}

impl PolicyBook {
    pub fn new(store: Arc<dyn HookStore>) -> Self {
        Self {
            store,
            sets: Copies::default(),
            grants: Copies::default(),
        }
    }

    /// The tenant's policies as they stand (at most [`FRESH_FOR`] behind a put on
    /// another node); None when it has none.
    pub async fn current(&self, tenant: &Arc<str>) -> Result<Option<Arc<Compiled>>, Error> {
        let store = &self.store;
        self.sets
            .get(tenant, store.policies_version(tenant), |_| async {
                let set = store.policies(tenant).await?;
                Ok(match set {
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
                })
            })
            .await
    }

    /// The tenant's standing grants as they stand (at most [`FRESH_FOR`] behind a
    /// change on another node), without those that had expired when they were read.
    pub async fn grants(&self, tenant: &Arc<str>) -> Result<Arc<Vec<GrantRecord>>, Error> {
        let store = &self.store;
        self.grants
            .get(tenant, store.grants_version(tenant), |version| async move {
                let now = now_ms();
                let mut grants = store.grants(tenant).await?;
                grants.retain(|g| g.expires_ms > now);
                Ok((version, Arc::new(grants)))
            })
            .await
    }

    /// Forgets the tenant's grants, which this node just changed: its next ask reads
    /// them again.
    pub fn grants_changed(&self, tenant: &str) {
        self.grants.by_tenant.lock().remove(tenant);
    }

    /// Takes a set this node just stored (compiled already), so that its next ask
    /// needs no read.
    pub fn installed(&self, tenant: Arc<str>, version: u64, compiled: Option<Arc<Compiled>>) {
        self.sets.keep(tenant, version, compiled);
    }
}

/// A copy of one tenant's value, with the version it was read at.
struct Copy<T> {
    version: u64,
    checked: Instant,
    value: T,
}

/// Copies by tenant, each checked against the stored version once it is older than
/// [`FRESH_FOR`].
struct Copies<T> {
    by_tenant: Mutex<HashMap<Arc<str>, Copy<T>>>,
}

impl<T> Default for Copies<T> {
    fn default() -> Self {
        Self {
            by_tenant: Mutex::default(),
        }
    }
}

impl<T: Clone> Copies<T> {
    /// The tenant's copy: kept while fresh, kept (and freshened) while `version` is the
    /// copy's, else `load`ed (given the version just read; it answers the version its
    /// value is of).
    async fn get<V, L, F>(&self, tenant: &Arc<str>, version: V, load: L) -> Result<T, Error>
    where
        V: Future<Output = Result<u64, Error>>,
        L: FnOnce(u64) -> F,
        F: Future<Output = Result<(u64, T), Error>>,
    {
        if let Some(copy) = self.by_tenant.lock().get(tenant)
            && copy.checked.elapsed() < FRESH_FOR
        {
            return Ok(copy.value.clone());
        }
        let version = version.await?;
        if let Some(copy) = self.by_tenant.lock().get_mut(tenant)
            && copy.version == version
        {
            copy.checked = Instant::now();
            return Ok(copy.value.clone());
        }
        let (version, value) = load(version).await?;
        self.keep(tenant.clone(), version, value.clone());
        Ok(value)
    }

    fn keep(&self, tenant: Arc<str>, version: u64, value: T) {
        let mut copies = self.by_tenant.lock();
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
                value,
            },
        );
    }
}
