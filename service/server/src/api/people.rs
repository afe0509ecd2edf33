//! `askgate.v1.People`: the people of the caller's tenant (docs/approvals.md "People"),
//! for the admin role with a credential not limited to some sessions. Each change is
//! audited with the change itself, as every admin change is.

use std::sync::Arc;

use askgate_proto::v1::{
    DeletePersonRequest, DeletePersonResponse, LinkCode, ListPeopleRequest, ListPeopleResponse,
    Person, StartLinkRequest, people_server::People as PeopleService,
};
use serde_json::json;
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{Gate, failed, resolver};
use crate::{
    auth::Action,
    backend::{audit_log::Audit, hooks::HookStore, people as linking},
    channels::{delivery::Hooks, links::IdentityLink},
    domain::{Error, people},
};

/// The `askgate.v1.People` service.
pub struct PeopleApi {
    gate: Gate,
    hooks: Arc<dyn HookStore>,
    /// What mails identity links (the email channel), and signs them.
    channels: Hooks,
}

impl PeopleApi {
    pub fn new(gate: Gate, channels: Hooks) -> Self {
        Self {
            gate,
            hooks: channels.store().clone(),
            channels,
        }
    }
}

#[tonic::async_trait]
impl PeopleService for PeopleApi {
    #[instrument(name = "PutPerson", skip_all, fields(tenant))]
    async fn put_person(&self, request: Request<Person>) -> Result<Response<Person>, Status> {
        let _timer = self.gate.timer("PutPerson");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let by = resolver(&request, &caller)?;
        let now = askgate_core::clock::now_ms();
        let record = people::record(&caller.tenant, request.into_inner(), now).map_err(failed)?;
        let details = json!({
            "id": record.id,
            "identities": record.identities,
            "groups": record.groups,
            "delegate": record.delegate,
        });
        let audit = Audit::admin_entry(&caller.tenant, &by, "person.put", details);
        self.hooks
            .put_person(&record, &audit)
            .await
            .map_err(failed)?;
        Ok(Response::new(people::to_proto(&record)))
    }

    #[instrument(name = "ListPeople", skip_all, fields(tenant))]
    async fn list_people(
        &self,
        request: Request<ListPeopleRequest>,
    ) -> Result<Response<ListPeopleResponse>, Status> {
        let _timer = self.gate.timer("ListPeople");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let listed = self.hooks.people(&caller.tenant).await.map_err(failed)?;
        Ok(Response::new(ListPeopleResponse {
            people: listed.iter().map(people::to_proto).collect(),
        }))
    }

    #[instrument(name = "DeletePerson", skip_all, fields(tenant))]
    async fn delete_person(
        &self,
        request: Request<DeletePersonRequest>,
    ) -> Result<Response<DeletePersonResponse>, Status> {
        let _timer = self.gate.timer("DeletePerson");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let by = resolver(&request, &caller)?;
        let id = request.into_inner().id;
        people::person_id("id", &id).map_err(failed)?;
        let audit = Audit::admin_entry(&caller.tenant, &by, "person.deleted", json!({ "id": id }));
        match self.hooks.delete_person(&caller.tenant, &id, &audit).await {
            Ok(true) => Ok(Response::new(DeletePersonResponse {})),
            Ok(false) => Err(failed(Error::NotFound("no person with that id".into()))),
            Err(e) => Err(failed(e)),
        }
    }

    #[instrument(name = "StartLink", skip_all, fields(tenant))]
    async fn start_link(
        &self,
        request: Request<StartLinkRequest>,
    ) -> Result<Response<LinkCode>, Status> {
        let _timer = self.gate.timer("StartLink");
        let caller = self.gate.admit(&request, Action::LinkIdentity, "")?;
        let email = &self.channels.channels().email;
        let address = match request.into_inner().email.as_str() {
            "" => None,
            raw => Some(email.identity_address(raw).map_err(failed)?),
        };
        let store = &*self.hooks;
        let Some(person) = linking::person_of(store, &caller.tenant, &caller.sub)
            .await
            .map_err(failed)?
        else {
            return Err(failed(Error::NotFound(
                "your subject is no person's of the tenant: an admin adds you first \
                 (askgate people put)"
                    .into(),
            )));
        };
        let (code, expires_ms) = linking::start_link(store, &caller.tenant, &person.id)
            .await
            .map_err(failed)?;
        let expires_at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_ms);
        let code = match address {
            None => code,
            // Mailed inside a link: only the mailbox's reader may use it.
            Some(address) => {
                let link = IdentityLink {
                    tenant: caller.tenant.to_string(),
                    code,
                    address,
                    expires_ms,
                };
                email
                    .mail_identity_link(&link, person.shown_name())
                    .await
                    .map_err(failed)?;
                String::new()
            }
        };
        Ok(Response::new(LinkCode {
            code,
            expires_at: Some(expires_at.into()),
        }))
    }
}
