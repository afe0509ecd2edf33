//! The tenant's policy before asking (`askgate.v1.Policies`, docs/policy.md), for
//! the admin role.

use crate::{
    Ask, Client, Error,
    proto::{
        AnswerRequest, GetPoliciesRequest, Grant, GrantRequest, ListGrantsRequest, PolicySet,
        PutPoliciesRequest, QuestionAnswer, RevokeGrantRequest, TestPoliciesRequest,
        TestPoliciesResponse,
    },
};

impl Client {
    /// Replaces the tenant's policy set: Cedar policies (`text`), validated against
    /// `schema` when there is one, in `mode` (`enforce` or `shadow`; empty: enforce).
    /// [`crate::Reason::BadRequest`] with Cedar's message when they do not parse or
    /// fit; the stored set then stays as it was.
    pub async fn put_policies(&mut self, set: PutPoliciesRequest) -> Result<PolicySet, Error> {
        let request = self.request(set);
        Ok(self.policies.put_policies(request).await?.into_inner())
    }

    /// The tenant's policy set (version 0 when it has none).
    pub async fn get_policies(&mut self) -> Result<PolicySet, Error> {
        let request = self.request(GetPoliciesRequest {});
        Ok(self.policies.get_policies(request).await?.into_inner())
    }

    /// What the tenant's policies would decide about `ask` (asked by the caller),
    /// without asking anyone or recording anything.
    pub async fn test_policies(&mut self, ask: &Ask) -> Result<TestPoliciesResponse, Error> {
        self.test_policies_with(TestPoliciesRequest {
            ask: Some(ask.request.clone()),
            ..Default::default()
        })
        .await
    }

    /// [`Self::test_policies`] with every option: another subject and groups, or a
    /// candidate set instead of the stored one.
    pub async fn test_policies_with(
        &mut self,
        test: TestPoliciesRequest,
    ) -> Result<TestPoliciesResponse, Error> {
        let request = self.request(test);
        Ok(self.policies.test_policies(request).await?.into_inner())
    }

    /// Answers an ask with answers that approve its action, and allows the same action
    /// from now on without asking, in `grant`'s scope (`session`, `agent` or `tenant`)
    /// for its `ttl_ms` ("approve and allow for ..."; docs/policy.md).
    /// [`crate::Reason::BadRequest`] when the answers do not approve the action.
    pub async fn answer_and_grant(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        answers: Vec<QuestionAnswer>,
        grant: GrantRequest,
    ) -> Result<(), Error> {
        let request = self.request(AnswerRequest {
            session_id: session_id.to_owned(),
            rpc_id: rpc_id.to_owned(),
            answers,
            grant: Some(grant),
        });
        self.inner.answer(request).await?;
        Ok(())
    }

    /// The tenant's standing grants that still hold, newest first (admin role).
    pub async fn list_grants(&mut self) -> Result<Vec<Grant>, Error> {
        let request = self.request(ListGrantsRequest {});
        Ok(self.grants.list_grants(request).await?.into_inner().grants)
    }

    /// Ends a grant at once; [`crate::Reason::NotFound`] when there is none by that id.
    pub async fn revoke_grant(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(RevokeGrantRequest { id: id.to_owned() });
        self.grants.revoke_grant(request).await?;
        Ok(())
    }
}
