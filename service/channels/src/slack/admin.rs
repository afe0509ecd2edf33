//! `askgate.v1.Slack`: a tenant's Slack apps. Every call needs the admin role (with a
//! credential not limited to some sessions) and sees only the caller's tenant; an app's secrets are never returned.

use askgate_proto::v1::{
    ConnectSlackRequest, DisconnectSlackRequest, DisconnectSlackResponse, ListSlackAppsRequest,
    ListSlackAppsResponse, SlackApp,
    slack_server::{Slack as Service, SlackServer},
};

use super::Slack;

crate::api::connections_service! {
    /// The `askgate.v1.Slack` service.
    SlackApi for Slack in slack: Service, SlackServer;
    connect_slack(ConnectSlackRequest) -> SlackApp as "ConnectSlack";
    list_slack_apps(ListSlackAppsRequest) -> ListSlackAppsResponse { apps } as "ListSlackApps";
    disconnect_slack(DisconnectSlackRequest) -> DisconnectSlackResponse as "DisconnectSlack";
}
