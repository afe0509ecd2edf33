//! Secrets kept out of places they leak from: files read with a check of who else may
//! read them, and a wrapper whose `Debug` never shows the value.

use std::{fmt, path::Path};

use anyhow::Context as _;

/// A secret value (a token): `Debug` and `Display` show `<redacted>`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Ok(Self(value.to_owned()))
    }
}

/// A secret file's contents with trailing whitespace (a final newline) removed, and a
/// warning, when the file is readable by its group or by anyone, for the caller to
/// show.
pub fn read_file(path: &Path) -> anyhow::Result<(Vec<u8>, Option<String>)> {
    let mut bytes =
        std::fs::read(path).with_context(|| format!("failed to read {}", path.display()))?;
    while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
        bytes.pop();
    }
    Ok((bytes, loose_permissions(path)))
}

/// [`read_file`] for a key the server trusts (a signing or sealing key, a JWT secret):
/// refused when another user owns it or its group or others may write it (whoever can
/// change it can forge what it signs).
pub fn read_key_file(path: &Path) -> anyhow::Result<(Vec<u8>, Option<String>)> {
    askgate_engines::sqlite::refuse_shared(path)?;
    read_file(path)
}

/// Says so when `path` may be read by its group or by others (mode & 0o077 on Unix).
pub fn loose_permissions(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        (mode & 0o077 != 0).then(|| {
            format!(
                "{} holds a secret but is readable by others (mode {:o}); chmod 600 it",
                path.display(),
                mode & 0o777
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_shows_in_debug() {
        let secret = Secret::new("agk_supersecret");
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(<redacted>)");
        assert_eq!(secret.expose(), "agk_supersecret");
    }

    #[cfg(unix)]
    #[test]
    fn group_or_world_readable_files_are_reported() {
        use std::os::unix::fs::PermissionsExt as _;
        let path = std::env::temp_dir().join(format!("askgate-secret-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, "s3cret\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let (bytes, warning) = read_file(&path).expect("read");
        assert_eq!(bytes, b"s3cret");
        assert!(warning.expect("a warning").contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read_file(&path).expect("read").1, None);
        std::fs::remove_file(&path).expect("cleanup");
    }
}
