//! The hook store's rules for policy sets and standing grants (`service Policies`,
//! `service Grants`), as every store keeps them.

use super::{HookStore, change};
use crate::domain::Error;

/// A tenant's policy set replaces the one before, its version counts the puts (what
/// nodes compare their compiled copies with), and tenants do not share sets.
pub async fn policy_sets_are_per_tenant_and_versioned(store: &dyn HookStore) -> Result<(), Error> {
    use super::records::{Mode, PolicySetRecord};
    assert_eq!(store.policies("a").await?, None);
    assert_eq!(store.policies_version("a").await?, 0);
    let set = |tenant: &str, text: &str, mode| PolicySetRecord {
        tenant: tenant.into(),
        text: text.into(),
        schema: "action \"deploy\";".into(),
        mode,
        version: 0,
        updated_ms: 1_700_000_000_123,
        policy_ids: vec!["policy0".into()],
    };
    let first = store
        .put_policies(
            &set("a", "forbid(principal, action, resource);", Mode::Enforce),
            &change("a", "s1"),
        )
        .await?;
    assert_eq!(first.version, 1);
    let second = store
        .put_policies(&set("a", "", Mode::Shadow), &change("a", "s2"))
        .await?;
    assert_eq!(second.version, 2);
    assert_eq!(
        store.policies("a").await?,
        Some(second.clone()),
        "kept whole"
    );
    assert_eq!(store.policies_version("a").await?, 2);
    assert_eq!(store.policies_version("b").await?, 0, "per tenant");
    let other = store
        .put_policies(
            &set("b", "permit(principal, action, resource);", Mode::Enforce),
            &change("b", "s3"),
        )
        .await?;
    assert_eq!(other.version, 1, "each tenant counts its own");
    assert_eq!(store.policies("a").await?, Some(second));
    Ok(())
}

/// A tenant's standing grants: listed newest first, each change counted on the
/// version, revoked once, expired ones dropped by the next put.
pub async fn grants_are_per_tenant_revoked_and_versioned(
    store: &dyn HookStore,
) -> Result<(), Error> {
    use super::records::{GrantRecord, GrantScope};
    let grant = |tenant: &str, id: &str, created_ms: u64, expires_ms: u64| GrantRecord {
        tenant: tenant.into(),
        id: id.into(),
        scope: GrantScope::Session,
        session_id: "s".into(),
        agent_id: String::new(),
        action_name: "Bash".into(),
        action_digest: "d".into(),
        match_json: String::new(),
        granted_by: "ana".into(),
        asked_by: "bot".into(),
        rpc_id: "r".into(),
        created_ms,
        expires_ms,
    };
    assert_eq!(store.grants_version("a").await?, 0);
    store
        .put_grant(&grant("a", "g1", 10, 100), &change("a", "g1"))
        .await?;
    store
        .put_grant(&grant("a", "g2", 20, 1000), &change("a", "g2"))
        .await?;
    store
        .put_grant(&grant("b", "g3", 20, 1000), &change("b", "g3"))
        .await?;
    let ids = |grants: Vec<GrantRecord>| grants.into_iter().map(|g| g.id).collect::<Vec<_>>();
    assert_eq!(ids(store.grants("a").await?), ["g2", "g1"], "newest first");
    assert_eq!(ids(store.grants("b").await?), ["g3"], "per tenant");
    let version = store.grants_version("a").await?;
    assert!(version >= 2, "{version}");
    // A put after g1 expired drops it.
    store
        .put_grant(&grant("a", "g4", 200, 1000), &change("a", "g4"))
        .await?;
    assert_eq!(ids(store.grants("a").await?), ["g4", "g2"]);
    assert!(store.grants_version("a").await? > version);
    let version = store.grants_version("a").await?;
    assert!(store.revoke_grant("a", "g2", &change("a", "r1")).await?);
    assert!(!store.revoke_grant("a", "g2", &change("a", "r2")).await?);
    assert!(
        !store.revoke_grant("b", "g4", &change("b", "r3")).await?,
        "another tenant's"
    );
    assert_eq!(ids(store.grants("a").await?), ["g4"]);
    assert!(store.grants_version("a").await? > version);
    Ok(())
}
