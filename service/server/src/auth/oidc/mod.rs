//! Signing in to the console with the company's identity provider (OpenID Connect,
//! `--oidc-issuer`): the authorization code flow with PKCE ([`routes`]), ID tokens
//! verified against the issuer's key set ([`id_token`]), and the short-lived console
//! session it ends in ([`session`]): a sealed, HttpOnly cookie that gRPC-Web calls
//! carry with a CSRF header, and that every node holding the same `--secret-key-file`
//! opens. Calls made with it are the `console` channel's.

mod id_token;
mod routes;
pub mod session;

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context as _, bail};
use askgate_channels::{
    egress::send::{Sender, Target},
    sealed::SealingKey,
    secret::Secret,
};
use serde::Deserialize;
use tracing::info;

pub use routes::SignInRoutes;
pub use session::Sessions;

use super::{Role, jwks::RemoteJwks};
use crate::domain::validate;

/// How long a console session lasts unless `--oidc-session-ttl` says otherwise.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(60 * 60);

/// How long one request to the identity provider may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a discovery document or token response read at most.
const MAX_PROVIDER_BYTES: usize = 64 * 1024;

/// The sign-in's settings (`--oidc-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// The issuer, exactly as its ID tokens name it (`iss`).
    pub issuer: String,
    /// The console's client id at the provider: what ID tokens must be for (`aud`).
    pub client_id: String,
    /// The client secret (a confidential client); none: a public client, which PKCE
    /// alone protects.
    pub client_secret_file: Option<PathBuf>,
    /// The tenant a signed-in person acts in.
    pub tenant: TenantFrom,
    /// The ID token claim naming the person's groups.
    pub groups_claim: String,
    /// Which groups get which roles; a person in none is not let in.
    pub role_map: RoleMap,
    /// How long a console session lasts.
    pub session_ttl: Duration,
}

/// Where a signed-in person's tenant comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantFrom {
    /// Every person of the provider is in this tenant (`--oidc-tenant`).
    Fixed(String),
    /// The ID token's claim of this name (`--oidc-tenant-claim`).
    Claim(String),
}

/// `--oidc-role-map group=role,...`: the roles a person's groups give; the group `*`
/// is everyone the provider signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMap(Vec<(String, Role)>);

impl RoleMap {
    /// Parses `group=role` pairs (a group may be named more than once).
    pub fn parse(pairs: &[String]) -> Result<Self, String> {
        if pairs.is_empty() {
            return Err(
                "--oidc-role-map is needed with --oidc-issuer: name the groups whose people may \
                 use the console (ops=ui,sre=admin; * for everyone the provider signs in)"
                    .into(),
            );
        }
        let mut map = Vec::with_capacity(pairs.len());
        for pair in pairs {
            let (group, role) = pair
                .split_once('=')
                .map(|(g, r)| (g.trim(), r.trim()))
                .filter(|(g, _)| !g.is_empty())
                .ok_or_else(|| format!("--oidc-role-map {pair:?}: give it as group=role"))?;
            let role = Role::parse(role).ok_or_else(|| {
                format!("--oidc-role-map {pair:?}: {role:?} is not one of agent, ui, admin")
            })?;
            map.push((group.to_owned(), role));
        }
        Ok(Self(map))
    }

    /// The roles `groups` give, each once, in the map's order.
    pub fn roles(&self, groups: &[String]) -> Vec<Role> {
        let mut roles = Vec::new();
        for (group, role) in &self.0 {
            let member = group == "*" || groups.iter().any(|g| g == group);
            if member && !roles.contains(role) {
                roles.push(*role);
            }
        }
        roles
    }
}

impl OidcConfig {
    /// Checks what can be checked before the provider is reached.
    pub fn validate(&self) -> Result<(), String> {
        Target::parse(&self.issuer).map_err(|e| format!("--oidc-issuer {}: {e}", self.issuer))?;
        if self.client_id.is_empty() {
            return Err("--oidc-client-id must not be empty".into());
        }
        if let TenantFrom::Fixed(tenant) = &self.tenant {
            validate::tenant_name(tenant).map_err(|e| format!("--oidc-tenant: {e}"))?;
        }
        if self.session_ttl < Duration::from_secs(60) {
            return Err("--oidc-session-ttl must be at least a minute".into());
        }
        Ok(())
    }
}

/// What the issuer's discovery document says, as far as the sign-in needs it.
#[derive(Debug, Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    scopes_supported: Vec<String>,
    #[serde(default)]
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// The identity provider, discovered.
pub(crate) struct Provider {
    authorization_endpoint: String,
    token_endpoint: Target,
    jwks: Arc<RemoteJwks>,
    /// What the sign-in asks for: `openid profile email`, and the groups claim's scope
    /// when the provider offers one of that name.
    scope: String,
}

/// The running sign-in: the provider, the sessions, and the settings.
pub struct SignIn {
    config: OidcConfig,
    client_secret: Option<Secret>,
    provider: Provider,
    sessions: Arc<Sessions>,
    sender: Sender,
    /// `--public-url`'s origin: where the provider sends the browser back to.
    public_origin: Option<String>,
    /// The listener speaks TLS.
    tls: bool,
}

impl SignIn {
    /// Discovers the issuer and fetches its key set; sessions are sealed with `key`.
    pub async fn start(
        config: OidcConfig,
        key: Arc<SealingKey>,
        public_origin: Option<String>,
        tls: bool,
    ) -> anyhow::Result<Arc<Self>> {
        config.validate().map_err(anyhow::Error::msg)?;
        let client_secret = match &config.client_secret_file {
            Some(path) => {
                let (secret, warning) = super::secret::read_file(path)
                    .with_context(|| format!("--oidc-client-secret-file {}", path.display()))?;
                if let Some(warning) = warning {
                    tracing::warn!("{warning}");
                }
                let secret = String::from_utf8(secret).context("the client secret is not UTF-8")?;
                anyhow::ensure!(
                    !secret.is_empty(),
                    "--oidc-client-secret-file {} is empty",
                    path.display()
                );
                Some(Secret::new(secret))
            }
            None => None,
        };
        let sender = Sender::new(true, PROVIDER_TIMEOUT).with_max_response(MAX_PROVIDER_BYTES);
        let provider = discover(&sender, &config)
            .await
            .with_context(|| format!("--oidc-issuer {}", config.issuer))?;
        info!(issuer = %config.issuer, "console sign-in with the identity provider");
        let sessions = Arc::new(Sessions::new(key, config.session_ttl));
        Ok(Arc::new(Self {
            config,
            client_secret,
            provider,
            sessions,
            sender,
            public_origin,
            tls,
        }))
    }

    /// The console sessions this sign-in opens: what the gate accepts on calls.
    pub fn sessions(&self) -> Arc<Sessions> {
        self.sessions.clone()
    }
}

/// The issuer's endpoints and keys, from `/.well-known/openid-configuration`.
async fn discover(sender: &Sender, config: &OidcConfig) -> anyhow::Result<Provider> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        config.issuer.trim_end_matches('/')
    );
    let target = Target::parse(&url).map_err(anyhow::Error::msg)?;
    let (status, body) = sender.get(&target).await.map_err(anyhow::Error::msg)?;
    if !status.is_success() {
        bail!("{url} answered {status}");
    }
    let found: Discovery = serde_json::from_slice(&body)
        .with_context(|| format!("{url} is not a discovery document"))?;
    // OpenID Connect Discovery §4.3: the document must name the issuer asked for.
    if found.issuer != config.issuer {
        bail!(
            "{url} names the issuer {:?}: give exactly that as --oidc-issuer",
            found.issuer
        );
    }
    if let Some(methods) = &found.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        bail!("the provider does not offer PKCE with S256, which the sign-in needs");
    }
    Target::parse(&found.authorization_endpoint)
        .map_err(|e| anyhow::anyhow!("authorization_endpoint: {e}"))?;
    let token_endpoint =
        Target::parse(&found.token_endpoint).map_err(|e| anyhow::anyhow!("token_endpoint: {e}"))?;
    let jwks = RemoteJwks::start(&found.jwks_uri, "the issuer's jwks_uri").await?;
    let mut scope = String::from("openid profile email");
    if found.scopes_supported.contains(&config.groups_claim) {
        scope.push(' ');
        scope.push_str(&config.groups_claim);
    }
    Ok(Provider {
        authorization_endpoint: found.authorization_endpoint,
        token_endpoint,
        jwks,
        scope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_map_gives_roles_by_group() {
        let map =
            RoleMap::parse(&["ops=ui".into(), "sre=admin".into(), "sre=ui".into()]).expect("a map");
        assert_eq!(map.roles(&["ops".into()]), vec![Role::Ui]);
        assert_eq!(map.roles(&["sre".into()]), vec![Role::Admin, Role::Ui]);
        assert!(map.roles(&["finance".into()]).is_empty());
        assert!(map.roles(&[]).is_empty());
        let everyone = RoleMap::parse(&["*=ui".into()]).expect("a map");
        assert_eq!(everyone.roles(&[]), vec![Role::Ui]);
        for bad in ["ops", "=ui", "ops=owner"] {
            assert!(RoleMap::parse(&[bad.into()]).is_err(), "{bad}");
        }
        assert!(RoleMap::parse(&[]).is_err(), "a map is needed");
    }
}
