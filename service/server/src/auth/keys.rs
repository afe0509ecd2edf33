//! API keys: a JSON file maps the SHA-256 of each key to a tenant, a subject, roles and
//! optional session patterns. Keys themselves are never stored. A presented key is
//! hashed and compared with every entry in constant time; the file is re-read on
//! SIGHUP (a file that fails to parse keeps the previous keys).
//!
//! ```json
//! {"keys": [
//!   {"sha256": "9f86d08…", "tenant": "acme", "sub": "acme-ui", "roles": ["ui"]},
//!   {"sha256": "60303ae…", "tenant": "acme", "sub": "worker-7", "roles": ["agent"],
//!    "sessions": ["team-a/*"]}
//! ]}
//! ```

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use super::{Failure, Principal, Role, Validity, parse_roles};
use crate::domain::{approval, validate};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    pub keys: Vec<KeyEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// Lowercase hex SHA-256 of the key.
    pub sha256: String,
    pub tenant: String,
    pub sub: String,
    pub roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    /// The groups the key's caller is in (what an ask's approvers may name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A parsed key: its hash and who it makes the caller.
struct Key {
    hash: [u8; 32],
    principal: Principal,
}

/// The keys file, loaded and reloadable.
pub struct KeyStore {
    path: PathBuf,
    /// The keys in force; a reload replaces them, and the streams that must end when
    /// their key is removed watch for that.
    keys: watch::Sender<Arc<Vec<Key>>>,
}

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The lowercase hex SHA-256 of a key, as the keys file stores it.
pub fn hash_hex(key: &str) -> String {
    hex::encode(hash(key))
}

fn parse(file: KeyFile) -> anyhow::Result<Vec<Key>> {
    file.keys
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let mut hash = [0u8; 32];
            hex::decode_to_slice(&entry.sha256, &mut hash)
                .with_context(|| format!("keys[{i}].sha256 is not 64 hex digits"))?;
            approval::credential_subject(&entry.sub)
                .map_err(|e| anyhow::anyhow!("keys[{i}].sub: {e}"))?;
            validate::tenant_name(&entry.tenant)
                .map_err(|e| anyhow::anyhow!("keys[{i}].tenant: {e}"))?;
            let roles = parse_roles(entry.roles.iter().map(String::as_str))
                .map_err(|e| anyhow::anyhow!("keys[{i}].roles: {e}"))?;
            if roles.is_empty() {
                bail!("keys[{i}].roles: give at least one of agent, ui, admin");
            }
            let groups = super::groups(entry.groups)
                .map_err(|e| anyhow::anyhow!("keys[{i}].groups: {e}"))?;
            Ok(Key {
                hash,
                principal: Principal {
                    sub: entry.sub,
                    tenant: entry.tenant.into(),
                    roles,
                    sessions: entry.sessions,
                    groups,
                    validity: Validity::WhileListed(hash),
                    console: false,
                },
            })
        })
        .collect()
}

fn read(path: &Path) -> anyhow::Result<KeyFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read the keys file {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("failed to parse the keys file {}", path.display()))
}

impl KeyStore {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let keys = parse(read(path)?)?;
        Ok(Self {
            path: path.to_owned(),
            keys: watch::Sender::new(Arc::new(keys)),
        })
    }

    /// Re-reads the file; on failure the previous keys stay in force.
    pub fn reload(&self) -> anyhow::Result<()> {
        let keys = parse(read(&self.path)?)?;
        let count = keys.len();
        self.keys.send_replace(Arc::new(keys));
        tracing::info!(keys = count, path = %self.path.display(), "keys file reloaded");
        Ok(())
    }

    pub fn authenticate(&self, token: &str) -> Result<Principal, Failure> {
        let presented = hash(token);
        let keys = self.keys.borrow().clone();
        // Compare with every key, without stopping at a match, in constant time each.
        let mut found = None;
        for key in keys.iter() {
            if bool::from(key.hash.ct_eq(&presented)) {
                found = Some(&key.principal);
            }
        }
        found.cloned().ok_or(Failure::UnknownKey)
    }

    /// Completes once the keys in force no longer list the key with this SHA-256 for
    /// the same caller (tenant, subject, roles, sessions): removed, or changed.
    pub fn unlisted(
        &self,
        hash: [u8; 32],
        principal: Principal,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut keys = self.keys.subscribe();
        async move {
            let listed = |keys: &Vec<Key>| {
                keys.iter()
                    .any(|key| key.hash == hash && key.principal == principal)
            };
            if keys.wait_for(|keys| !listed(keys)).await.is_err() {
                // The store went away with the server: nothing revokes the key now.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// `askgate keys add`: appends a new key to the file (created if missing) and returns
/// the key itself, which is shown once and stored nowhere.
pub fn add(
    path: &Path,
    tenant: &str,
    sub: &str,
    roles: &[Role],
    sessions: Option<Vec<String>>,
    groups: Vec<String>,
) -> anyhow::Result<String> {
    let groups = super::groups(groups).map_err(|e| anyhow::anyhow!("--group: {e}"))?;
    let mut file = match path.exists() {
        true => read(path)?,
        false => KeyFile::default(),
    };
    let key = format!(
        "agk_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let role_names = roles.iter().map(|r| r.as_str().to_owned()).collect();
    file.keys.push(KeyEntry {
        sha256: hash_hex(&key),
        tenant: tenant.to_owned(),
        sub: sub.to_owned(),
        roles: role_names,
        sessions,
        groups,
    });
    parse(file.clone())?;
    let text = serde_json::to_string_pretty(&file).context("failed to encode the keys file")?;
    replace_atomically(path, (text + "\n").as_bytes())?;
    Ok(key)
}

/// Writes `contents` to a new file of its own beside `path` (unique name, mode 0600,
/// never an existing file), flushes it, then renames it over `path`: a reader sees the
/// old file or the new one, and two writers never share a temporary file.
fn replace_atomically(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(contents)?;
            file.sync_all()
        })
        .with_context(|| format!("failed to write {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("failed to replace {}", path.display()))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp); // Best effort: the error below says what failed.
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_keys_authenticate_and_others_do_not() {
        let dir = std::env::temp_dir().join(format!("askgate-keys-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("keys.json");
        let groups = vec!["sre".to_owned(), "dba".to_owned()];
        let ui = add(&path, "acme", "acme-ui", &[Role::Ui], None, groups).expect("add");
        let sessions = Some(vec!["a/*".into()]);
        let agent = add(&path, "acme", "w", &[Role::Agent], sessions, vec![]).expect("add");
        let store = KeyStore::load(&path).expect("load");
        let principal = store.authenticate(&ui).expect("ui key");
        assert_eq!(
            (principal.sub.as_str(), &*principal.tenant),
            ("acme-ui", "acme")
        );
        assert_eq!(principal.groups, ["sre", "dba"]);
        assert!(store.authenticate(&agent).expect("agent").groups.is_empty());
        let bad = add(&path, "acme", "x", &[Role::Ui], None, vec!["a\tb".into()]);
        assert!(
            bad.expect_err("a control character")
                .to_string()
                .contains("--group")
        );
        assert_eq!(
            store.authenticate(&agent).expect("agent").sessions,
            Some(vec!["a/*".into()])
        );
        assert_eq!(store.authenticate("agk_nope"), Err(Failure::UnknownKey));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains(&ui), "the key itself is never stored");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "written with mode 0600");
        }
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .filter(|n| n != "keys.json")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_broken_file_is_refused_with_the_entry_named() {
        let file: KeyFile = serde_json::from_str(
            r#"{"keys":[{"sha256":"xyz","tenant":"t","sub":"s","roles":["ui"]}]}"#,
        )
        .expect("json");
        let err = parse(file).err().expect("refused").to_string();
        assert!(err.contains("keys[0].sha256"), "{err}");
    }

    #[test]
    fn a_key_naming_an_invalid_tenant_is_refused_when_loaded() {
        let sha = hash_hex("k");
        for tenant in ["acme/x", "", "a b", &"t".repeat(65)] {
            let file = KeyFile {
                keys: vec![KeyEntry {
                    sha256: sha.clone(),
                    tenant: tenant.into(),
                    sub: "s".into(),
                    roles: vec!["ui".into()],
                    sessions: None,
                    groups: Vec::new(),
                }],
            };
            let err = parse(file).err().expect("refused").to_string();
            assert!(err.contains("keys[0].tenant"), "{tenant:?}: {err}");
        }
    }
}
