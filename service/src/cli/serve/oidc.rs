//! `askgate serve --oidc-*`: the console's sign-in with the company's identity
//! provider, to the [`OidcConfig`] of the node's HTTP side.

use std::{path::PathBuf, time::Duration};

use askgate_server::auth::{
    jwt::DEFAULT_GROUPS_CLAIM,
    oidc::{DEFAULT_SESSION_TTL, OidcConfig, RoleMap, TenantFrom},
};
use clap::Args;

use crate::cli::common::{parse_duration, span};

/// Console sign-in with OpenID Connect (`--oidc-*`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Console sign-in (OpenID Connect)")]
pub struct OidcArgs {
    /// The identity provider's issuer URL (`https://login.example.com/realms/acme`):
    /// the console signs people in there (authorization code with PKCE), ID tokens
    /// are verified against its published keys. Needs --auth keys or jwt, and
    /// --secret-key-file on Redis.
    #[arg(long, env = "ASKGATE_OIDC_ISSUER", requires_all = ["oidc_client_id", "oidc_role_map"])]
    pub oidc_issuer: Option<String>,
    /// The console's client id at the provider; its redirect URI there is
    /// `<this server>/console/callback` (the --public-url's, behind a proxy).
    #[arg(long, env = "ASKGATE_OIDC_CLIENT_ID", requires = "oidc_issuer")]
    pub oidc_client_id: Option<String>,
    /// File holding the client secret (a confidential client, sent as HTTP Basic);
    /// without it, a public client that PKCE alone protects.
    #[arg(
        long,
        env = "ASKGATE_OIDC_CLIENT_SECRET_FILE",
        requires = "oidc_issuer"
    )]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// The ID token claim naming the signed-in person's tenant.
    #[arg(
        long,
        env = "ASKGATE_OIDC_TENANT_CLAIM",
        requires = "oidc_issuer",
        conflicts_with = "oidc_tenant"
    )]
    pub oidc_tenant_claim: Option<String>,
    /// The tenant every person of the provider acts in (default: `default`).
    #[arg(long, env = "ASKGATE_OIDC_TENANT", requires = "oidc_issuer")]
    pub oidc_tenant: Option<String>,
    /// The ID token claim naming the person's groups (asked for as a scope too, when
    /// the provider offers a scope of that name).
    #[arg(long, env = "ASKGATE_OIDC_GROUPS_CLAIM", default_value = DEFAULT_GROUPS_CLAIM)]
    pub oidc_groups_claim: String,
    /// Which groups get which roles (`ops=ui,sre=admin`; `*=ui` for everyone the
    /// provider signs in); a person in none of them is not let in.
    #[arg(
        long,
        env = "ASKGATE_OIDC_ROLE_MAP",
        value_delimiter = ',',
        requires = "oidc_issuer"
    )]
    pub oidc_role_map: Vec<String>,
    /// How long a console session lasts before the person signs in again.
    #[arg(long, env = "ASKGATE_OIDC_SESSION_TTL", default_value = span(DEFAULT_SESSION_TTL), value_parser = parse_duration)]
    pub oidc_session_ttl: Duration,
}

impl OidcArgs {
    /// The sign-in, if `--oidc-issuer` asks for one.
    pub(super) fn to_config(&self) -> Result<Option<OidcConfig>, String> {
        let Some(issuer) = &self.oidc_issuer else {
            return Ok(None);
        };
        let tenant = match (&self.oidc_tenant_claim, &self.oidc_tenant) {
            (Some(claim), _) => TenantFrom::Claim(claim.clone()),
            (None, Some(tenant)) => TenantFrom::Fixed(tenant.clone()),
            (None, None) => TenantFrom::Fixed(askgate_server::domain::DEFAULT_TENANT.to_owned()),
        };
        let config = OidcConfig {
            issuer: issuer.clone(),
            client_id: self.oidc_client_id.clone().unwrap_or_default(),
            client_secret_file: self.oidc_client_secret_file.clone(),
            tenant,
            groups_claim: self.oidc_groups_claim.clone(),
            role_map: RoleMap::parse(&self.oidc_role_map)?,
            session_ttl: self.oidc_session_ttl,
        };
        config.validate()?;
        Ok(Some(config))
    }
}
