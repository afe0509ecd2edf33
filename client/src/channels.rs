//! The admin calls of the chat channels a tenant connects: Slack apps, Telegram bots
//! and email routes (admin role; docs/slack.md, docs/telegram.md, docs/email.md), and
//! of the people who answer through them (docs/approvals.md "People").

use crate::{
    Client, Error,
    proto::{
        ConnectEmailRequest, ConnectNtfyRequest, ConnectSlackRequest, ConnectTelegramRequest,
        DeletePersonRequest, DisconnectEmailRequest, DisconnectNtfyRequest, DisconnectSlackRequest,
        DisconnectTelegramRequest, EmailRoute, LinkCode, ListEmailRoutesRequest,
        ListNtfyTopicsRequest, ListPeopleRequest, ListSlackAppsRequest, ListTelegramBotsRequest,
        NtfyTopic, Person, SlackApp, StartLinkRequest, TelegramBot,
    },
};

impl Client {
    /// Connects a Slack app of the caller's tenant (admin role); the server checks its
    /// bot token with Slack first. The app's secrets are never returned.
    pub async fn connect_slack(&mut self, app: ConnectSlackRequest) -> Result<SlackApp, Error> {
        let request = self.request(app);
        Ok(self.slack.connect_slack(request).await?.into_inner())
    }

    /// The tenant's Slack apps, oldest first.
    pub async fn list_slack_apps(&mut self) -> Result<Vec<SlackApp>, Error> {
        let request = self.request(ListSlackAppsRequest {});
        Ok(self.slack.list_slack_apps(request).await?.into_inner().apps)
    }

    /// Disconnects a Slack app; [`crate::Reason::NotFound`] when the tenant has none by that id.
    pub async fn disconnect_slack(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(DisconnectSlackRequest { id: id.to_owned() });
        self.slack.disconnect_slack(request).await?;
        Ok(())
    }

    /// Connects a Telegram bot of the caller's tenant (admin role); the server checks
    /// its token with Telegram and points the bot's webhook at itself first. The bot's
    /// secrets are never returned.
    pub async fn connect_telegram(
        &mut self,
        bot: ConnectTelegramRequest,
    ) -> Result<TelegramBot, Error> {
        let request = self.request(bot);
        Ok(self.telegram.connect_telegram(request).await?.into_inner())
    }

    /// The tenant's Telegram bots, oldest first.
    pub async fn list_telegram_bots(&mut self) -> Result<Vec<TelegramBot>, Error> {
        let request = self.request(ListTelegramBotsRequest {});
        Ok(self
            .telegram
            .list_telegram_bots(request)
            .await?
            .into_inner()
            .bots)
    }

    /// Disconnects a Telegram bot; [`crate::Reason::NotFound`] when the tenant has none by
    /// that id.
    pub async fn disconnect_telegram(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(DisconnectTelegramRequest { id: id.to_owned() });
        self.telegram.disconnect_telegram(request).await?;
        Ok(())
    }

    /// Connects an email route of the caller's tenant (admin role): its addresses are
    /// mailed each ask, with signed links to answer it.
    pub async fn connect_email(&mut self, route: ConnectEmailRequest) -> Result<EmailRoute, Error> {
        let request = self.request(route);
        Ok(self.email.connect_email(request).await?.into_inner())
    }

    /// The tenant's email routes, oldest first.
    pub async fn list_email_routes(&mut self) -> Result<Vec<EmailRoute>, Error> {
        let request = self.request(ListEmailRoutesRequest {});
        Ok(self
            .email
            .list_email_routes(request)
            .await?
            .into_inner()
            .routes)
    }

    /// Disconnects an email route; [`crate::Reason::NotFound`] when the tenant has none by
    /// that id.
    pub async fn disconnect_email(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(DisconnectEmailRequest { id: id.to_owned() });
        self.email.disconnect_email(request).await?;
        Ok(())
    }

    /// Connects an ntfy topic of the caller's tenant (admin role): each ask is pushed
    /// to it, with actions to answer it. Its token is never returned.
    pub async fn connect_ntfy(&mut self, topic: ConnectNtfyRequest) -> Result<NtfyTopic, Error> {
        let request = self.request(topic);
        Ok(self.ntfy.connect_ntfy(request).await?.into_inner())
    }

    /// The tenant's ntfy topics, oldest first.
    pub async fn list_ntfy_topics(&mut self) -> Result<Vec<NtfyTopic>, Error> {
        let request = self.request(ListNtfyTopicsRequest {});
        Ok(self
            .ntfy
            .list_ntfy_topics(request)
            .await?
            .into_inner()
            .topics)
    }

    /// Disconnects an ntfy topic; [`crate::Reason::NotFound`] when the tenant has none
    /// by that id.
    pub async fn disconnect_ntfy(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(DisconnectNtfyRequest { id: id.to_owned() });
        self.ntfy.disconnect_ntfy(request).await?;
        Ok(())
    }

    /// Adds a person of the caller's tenant (admin role), or replaces the one with
    /// that id: their identities on every channel count as them.
    /// [`crate::Reason::BadRequest`] when an identity is another person's.
    pub async fn put_person(&mut self, person: Person) -> Result<Person, Error> {
        let request = self.request(person);
        Ok(self.people.put_person(request).await?.into_inner())
    }

    /// The tenant's people, by id.
    pub async fn list_people(&mut self) -> Result<Vec<Person>, Error> {
        let request = self.request(ListPeopleRequest {});
        Ok(self.people.list_people(request).await?.into_inner().people)
    }

    /// Removes a person; [`crate::Reason::NotFound`] when there is none by that id.
    pub async fn delete_person(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(DeletePersonRequest { id: id.to_owned() });
        self.people.delete_person(request).await?;
        Ok(())
    }

    /// A one-time code that links a channel identity to the caller's own person: sent
    /// as `/link CODE` to one of the tenant's Telegram bots in a private chat, or as the
    /// `/link CODE` slash command to one of its Slack apps, it adds that account. Good
    /// once, for 10 minutes.
    pub async fn start_link(&mut self) -> Result<LinkCode, Error> {
        let request = self.request(StartLinkRequest::default());
        Ok(self.people.start_link(request).await?.into_inner())
    }

    /// Mails `address` a link that adds it to the caller's own person once confirmed on
    /// its page (good once, for 10 minutes); the server needs the email channel's
    /// settings. The returned code is empty: it travels in the mail only.
    pub async fn start_link_by_mail(&mut self, address: &str) -> Result<LinkCode, Error> {
        let request = self.request(StartLinkRequest {
            email: address.to_owned(),
        });
        Ok(self.people.start_link(request).await?.into_inner())
    }
}
