//! Secrets the server keeps for tenants (a Slack app's bot token and signing secret),
//! sealed with the server's key (`--secret-key-file`) before they are stored, so a
//! copy of the store (a Redis dump, a backup) does not hold them in the clear.
//!
//! AES-256-GCM through `ring`, a fresh random nonce per value, and the value's purpose
//! and owner as associated data: a sealed value moved to another record or field does
//! not open.

use std::{fmt, path::Path};

use anyhow::{Context as _, bail};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use ring::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    hmac,
    rand::{SecureRandom, SystemRandom},
};

use crate::secret::{self, Secret};

/// The server's key for sealing tenants' secrets.
pub struct SealingKey {
    key: LessSafeKey,
    /// For [`Self::mac`]: HMAC-SHA256 keyed with a key derived from this one, so a
    /// MAC never uses the sealing key itself.
    mac: hmac::Key,
    random: SystemRandom,
}

/// What the MAC key is derived with: HMAC-SHA256(sealing key, this label).
const MAC_KEY_LABEL: &[u8] = b"askgate answers_hmac v1";

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealingKey(<redacted>)")
    }
}

/// Sealing failed (the system's random source) or a value did not open: the wrong
/// key, or a value altered or moved.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SealError(&'static str);

impl SealingKey {
    /// A key of 32 bytes.
    pub fn new(bytes: &[u8]) -> anyhow::Result<Self> {
        let key = UnboundKey::new(&AES_256_GCM, bytes)
            .map_err(|_| anyhow::anyhow!("a secret key is 32 bytes"))?;
        let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, bytes), MAC_KEY_LABEL);
        Ok(Self {
            key: LessSafeKey::new(key),
            mac: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
            random: SystemRandom::new(),
        })
    }

    /// A fresh random key: what a server without `--secret-key-file` seals with on the
    /// memory engine (its store lives and dies with the process).
    pub fn ephemeral() -> anyhow::Result<Self> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| anyhow::anyhow!("the system's random source failed"))?;
        Self::new(&bytes)
    }

    /// Reads a key file: 32 bytes as 64 hex digits or as base64 (e.g. from `openssl
    /// rand -base64 32`), or the 32 raw bytes. Warns (returned) when others may read it.
    pub fn from_file(path: &Path) -> anyhow::Result<(Self, Option<String>)> {
        let (contents, warning) = secret::read_key_file(path)?;
        let text = std::str::from_utf8(&contents).map(str::trim);
        let bytes = match text {
            Ok(t) if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) => {
                hex::decode(t).context("hex")?
            }
            Ok(t) if t.len() == 44 => BASE64.decode(t).context("base64")?,
            _ if contents.len() == 32 => contents,
            _ => bail!(
                "{} must hold a 32-byte key: 64 hex digits, base64, or the raw bytes",
                path.display()
            ),
        };
        Ok((Self::new(&bytes)?, warning))
    }

    /// The key in `path`, made there (32 random bytes in hex, readable by its owner
    /// only) when the file does not exist; whether it was made now.
    pub fn kept_in(path: &Path) -> anyhow::Result<(Self, bool)> {
        if path.exists() {
            let (key, _) = Self::from_file(path)?;
            return Ok((key, false));
        }
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| anyhow::anyhow!("the system's random source failed"))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path)?;
        std::io::Write::write_all(&mut file, hex::encode(bytes).as_bytes())?;
        file.sync_all()?;
        Ok((Self::new(&bytes)?, true))
    }

    /// `secret` sealed for `context` (what it is and whose): base64 of nonce and
    /// ciphertext with its tag.
    pub fn seal(&self, context: &str, secret: &Secret) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError("the system's random source failed"))?;
        let mut sealed = secret.expose().as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SealError("sealing failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(BASE64.encode(out))
    }

    /// Lowercase hex HMAC-SHA256 of `data` under the key derived from this one: what an
    /// audit record holds of a secret answer. Whoever holds the key can check that a
    /// given answer was the one given; nobody else can guess it from the record.
    pub fn mac(&self, data: &[u8]) -> String {
        hex::encode(hmac::sign(&self.mac, data))
    }

    /// A value that names this key without revealing it: what a store records of the
    /// key its secrets are sealed with, so that it is never opened with another.
    pub fn check(&self) -> String {
        self.mac(b"askgate key check v1")
    }

    /// Opens what `seal` made for the same `context`.
    pub fn open(&self, context: &str, sealed: &str) -> Result<Secret, SealError> {
        const UNOPENED: SealError = SealError(
            "a stored secret does not open with this server's key (is --secret-key-file the \
             one it was stored with?)",
        );
        let mut bytes = BASE64.decode(sealed).map_err(|_| UNOPENED)?;
        if bytes.len() < NONCE_LEN {
            return Err(UNOPENED);
        }
        let mut ciphertext = bytes.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| UNOPENED)?;
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut ciphertext)
            .map_err(|_| UNOPENED)?;
        let text = String::from_utf8(plain.to_vec()).map_err(|_| UNOPENED)?;
        Ok(Secret::new(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_context() {
        let key = SealingKey::new(&[7u8; 32]).expect("key");
        let secret = Secret::new("xoxb-123");
        let sealed = key.seal("slack/acme/app-1/bot", &secret).expect("seal");
        assert!(!sealed.contains("xoxb"));
        assert_ne!(
            sealed,
            key.seal("slack/acme/app-1/bot", &secret).expect("seal")
        );
        assert_eq!(
            key.open("slack/acme/app-1/bot", &sealed).expect("open"),
            secret
        );
        assert!(
            key.open("slack/globex/app-1/bot", &sealed).is_err(),
            "another owner"
        );
        let other = SealingKey::new(&[8u8; 32]).expect("key");
        assert!(
            other.open("slack/acme/app-1/bot", &sealed).is_err(),
            "another key"
        );
        let mut altered = BASE64.decode(&sealed).expect("base64");
        *altered.last_mut().expect("bytes") ^= 1;
        assert!(
            key.open("slack/acme/app-1/bot", &BASE64.encode(altered))
                .is_err()
        );
        assert!(SealingKey::new(&[0u8; 16]).is_err());
    }

    #[test]
    fn a_mac_is_keyed_and_not_the_sealing_keys_own() {
        let key = SealingKey::new(&[7u8; 32]).expect("key");
        let mac = key.mac(b"1234");
        assert_eq!(mac.len(), 64);
        assert_eq!(mac, key.mac(b"1234"));
        assert_ne!(mac, key.mac(b"1235"));
        assert_ne!(mac, SealingKey::new(&[8u8; 32]).expect("key").mac(b"1234"));
        let direct = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &[7u8; 32]), b"1234");
        assert_ne!(mac, hex::encode(direct), "the MAC key is derived");
    }
}
