//! `askgate.v1.Telegram`: a tenant's Telegram bots. Every call needs the admin role (with a
//! credential not limited to some sessions) and sees only the caller's tenant; a bot's secrets are never returned.

use askgate_proto::v1::{
    ConnectTelegramRequest, DisconnectTelegramRequest, DisconnectTelegramResponse,
    ListTelegramBotsRequest, ListTelegramBotsResponse, TelegramBot,
    telegram_server::{Telegram as Service, TelegramServer},
};

use super::Telegram;

crate::api::connections_service! {
    /// The `askgate.v1.Telegram` service.
    TelegramApi for Telegram in telegram: Service, TelegramServer;
    connect_telegram(ConnectTelegramRequest) -> TelegramBot as "ConnectTelegram";
    list_telegram_bots(ListTelegramBotsRequest) -> ListTelegramBotsResponse { bots } as "ListTelegramBots";
    disconnect_telegram(DisconnectTelegramRequest) -> DisconnectTelegramResponse as "DisconnectTelegram";
}
