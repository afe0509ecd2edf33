//! `askgate.v1.Telegram`: a tenant's Telegram bots. Like the `Webhooks` service, every
//! call needs the admin role (with a credential not limited to some sessions) and sees
//! only the caller's tenant; a bot's secrets are never returned.

use askgate_proto::v1::{
    ConnectTelegramRequest, DisconnectTelegramRequest, DisconnectTelegramResponse,
    ListTelegramBotsRequest, ListTelegramBotsResponse, TelegramBot, telegram_server::Telegram,
};
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{
    Gate,
    webhooks::{admin, failed, id},
};
use crate::{auth::Action, channels::delivery::Hooks};

/// The `askgate.v1.Telegram` service.
pub struct TelegramApi {
    hooks: Hooks,
    gate: Gate,
}

impl TelegramApi {
    pub fn new(hooks: Hooks, gate: Gate) -> Self {
        Self { hooks, gate }
    }
}

#[tonic::async_trait]
impl Telegram for TelegramApi {
    #[instrument(name = "ConnectTelegram", skip_all, fields(tenant))]
    async fn connect_telegram(
        &self,
        request: Request<ConnectTelegramRequest>,
    ) -> Result<Response<TelegramBot>, Status> {
        let _timer = self.gate.timer("ConnectTelegram");
        let (caller, by) = admin(&self.gate, &request)?;
        let bot = self
            .hooks
            .connect(
                &self.hooks.channels().telegram,
                &caller.tenant,
                request.into_inner(),
                &by,
            )
            .await
            .map_err(failed)?;
        Ok(Response::new(bot))
    }

    #[instrument(name = "ListTelegramBots", skip_all, fields(tenant))]
    async fn list_telegram_bots(
        &self,
        request: Request<ListTelegramBotsRequest>,
    ) -> Result<Response<ListTelegramBotsResponse>, Status> {
        let _timer = self.gate.timer("ListTelegramBots");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        self.hooks
            .list(&self.hooks.channels().telegram, &caller.tenant)
            .await
            .map(|bots| Response::new(ListTelegramBotsResponse { bots }))
            .map_err(failed)
    }

    #[instrument(name = "DisconnectTelegram", skip_all, fields(tenant))]
    async fn disconnect_telegram(
        &self,
        request: Request<DisconnectTelegramRequest>,
    ) -> Result<Response<DisconnectTelegramResponse>, Status> {
        let _timer = self.gate.timer("DisconnectTelegram");
        let (caller, by) = admin(&self.gate, &request)?;
        let bot = &request.get_ref().id;
        id("id", bot)?;
        self.hooks
            .disconnect(&self.hooks.channels().telegram, &caller.tenant, bot, &by)
            .await
            .map_err(failed)?;
        Ok(Response::new(DisconnectTelegramResponse {}))
    }
}
