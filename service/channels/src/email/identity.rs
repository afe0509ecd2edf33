//! Linking an address to a person by mail (docs/approvals.md "People"): a signed-in
//! person asks (`People.StartLink` with an address), askgate mails the address a link
//! carrying that person's one-time code, and the address joins the person once its
//! page is confirmed ([`super::pages`]): whoever confirms reads that mailbox.

use std::str::FromStr as _;

use lettre::message::Mailbox;
use uuid::Uuid;

use super::{Email, mail::Mail};
use crate::{domain::Error, domain::shown::escape_html as escape, links::IdentityLink};

/// Longest address taken (RFC 5321's path limit).
const MAX_ADDRESS_BYTES: usize = 254;

impl Email {
    /// The address in `raw` (`ana@example.com`, or `Ana <ana@example.com>`), if this
    /// server mails and it is one; BAD_REQUEST naming `email` if it is not.
    pub fn identity_address(&self, raw: &str) -> Result<String, Error> {
        self.ready()?;
        let bad = |why: String| Error::bad_request("email", why);
        if raw.len() > MAX_ADDRESS_BYTES {
            return Err(bad(format!("at most {MAX_ADDRESS_BYTES} bytes")));
        }
        let mailbox =
            Mailbox::from_str(raw.trim()).map_err(|e| bad(format!("not an address: {e}")))?;
        Ok(mailbox.email.to_string())
    }

    /// Mails `link`'s address the link that adds it to the person named `person`.
    pub async fn mail_identity_link(&self, link: &IdentityLink, person: &str) -> Result<(), Error> {
        let smtp = self.ready()?;
        let to = Mailbox::from_str(&link.address)
            .map_err(|e| Error::bad_request("email", format!("not an address: {e}")))?;
        let url = self.links.identity_url(link)?;
        let asked = format!("{person} asked to link this address to their askgate answers.");
        let how = "Open the link and confirm: answers you give by mail from this address then \
                   count as theirs. It works once, for 10 minutes.";
        let ignore = "If nobody asked you for this, ignore this mail: nothing changes.";
        let mail = Mail {
            subject: "Link this address to your askgate answers".into(),
            text: format!("{asked}\n\n{how}\n\nlink: {url}\n\n{ignore}\n"),
            html: format!(
                "<p>{}</p>\n<p>{}</p>\n<p><a href=\"{}\">Link this address</a></p>\n<p>{}</p>\n",
                escape(&asked),
                escape(how),
                escape(&url),
                escape(ignore)
            ),
        };
        let id = format!("<link.{}@askgate>", Uuid::new_v4());
        self.send(smtp, to, mail, id, None)
            .await
            .map_err(|e| Error::BackendUnavailable(format!("mailing the link failed: {e}")))
    }
}
