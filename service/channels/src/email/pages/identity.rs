//! `/link/{token}`: the page of a mailed identity link ([`crate::email::identity`]).
//! GET asks to confirm and changes nothing (a mail scanner that prefetches links links
//! nothing); POST adds `email:<address>` to the person whose one-time code the link
//! carries, which spends the code.

use http::{Method, StatusCode};

use super::{Links, notice, page};
use crate::{
    backend::{audit_log::Audit, hooks::records::PersonRecord},
    domain::{Resolver, model::EMAIL_CHANNEL},
    ingress::Reply,
};

impl Links {
    pub(super) async fn identity(&self, method: &Method, token: &str) -> Reply {
        let now = crate::channel::clock::now_ms();
        let link = match self.hooks.channels().links.verify_identity(token, now) {
            Ok(link) => link,
            Err(why) => return notice(StatusCode::FORBIDDEN, "This link does nothing", why),
        };
        let identity = format!("{EMAIL_CHANNEL}:{}", link.address);
        if method == Method::GET {
            let ask = format!(
                "Link {} to your askgate answers? Answers given by mail from it will count as yours.",
                link.address
            );
            return Reply::html(
                StatusCode::OK,
                page::confirm("Link this address", &[ask], "Link"),
            );
        }
        let audit = |person: &PersonRecord| {
            let by = Resolver::new(&identity, EMAIL_CHANNEL);
            let details = serde_json::json!({ "id": person.id, "linked": identity });
            Audit::admin_entry(&link.tenant, &by, "person.linked", details)
        };
        let store = self.hooks.store();
        match crate::backend::people::link(&**store, &link.tenant, &link.code, &identity, audit)
            .await
        {
            Ok(person) => {
                let name = person.shown_name();
                let done = format!("Linked: answers from {} count as {name}'s.", link.address);
                Reply::html(StatusCode::OK, page::notice("Linked", &[done]))
            }
            Err(e) => notice(
                StatusCode::BAD_REQUEST,
                "Not linked",
                &crate::channel::chat::refusal(&e),
            ),
        }
    }
}
