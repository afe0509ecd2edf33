//! `askgate.v1.Policies`: the tenant's policy before asking (docs/policy.md), for the
//! admin role with a credential not limited to some sessions. A put is compiled and
//! validated before it is stored (a set Cedar refuses leaves the stored one as it
//! was), audited with the change, and taken by this node at once; other nodes take it
//! at their next check of its version.

use std::{sync::Arc, time::Duration};

use askgate_contract::digest::sha256_hex;
use askgate_proto::v1::{
    GetPoliciesRequest, PolicyFill, PolicySet, PutPoliciesRequest, TestPoliciesRequest,
    TestPoliciesResponse, policies_server::Policies as PoliciesService,
};
use serde_json::json;
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{Gate, failed, resolver};
use crate::{
    auth::Action,
    backend::{
        audit_log::Audit,
        hooks::{
            HookStore,
            records::{Mode, PolicySetRecord},
        },
    },
    domain::Error,
    policy::{
        Asked, Decision, Policies, approvers,
        book::{Compiled, PolicyBook},
    },
};

/// The `askgate.v1.Policies` service.
pub struct PoliciesApi {
    gate: Gate,
    hooks: Arc<dyn HookStore>,
    book: Arc<PolicyBook>,
    audit: Audit,
}

impl PoliciesApi {
    pub fn new(gate: Gate, hooks: Arc<dyn HookStore>, book: Arc<PolicyBook>, audit: Audit) -> Self {
        Self {
            gate,
            hooks,
            book,
            audit,
        }
    }
}

#[tonic::async_trait]
impl PoliciesService for PoliciesApi {
    #[instrument(name = "PutPolicies", skip_all, fields(tenant))]
    async fn put_policies(
        &self,
        request: Request<PutPoliciesRequest>,
    ) -> Result<Response<PolicySet>, Status> {
        let _timer = self.gate.timer("PutPolicies");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let by = resolver(&request, &caller)?;
        let PutPoliciesRequest { text, mode, schema } = request.into_inner();
        let mode = Mode::parse("mode", &mode).map_err(failed)?;
        let (text, schema, policies) = compile(text, schema).await.map_err(failed)?;
        let record = PolicySetRecord {
            tenant: caller.tenant.to_string(),
            policy_ids: policies.as_ref().map(Policies::ids).unwrap_or_default(),
            text,
            schema,
            mode,
            version: 0,
            updated_ms: askgate_core::clock::now_ms(),
        };
        let details = json!({
            "mode": mode.as_str(),
            "policy_ids": record.policy_ids,
            "text_sha256": sha256_hex(record.text.as_bytes()),
            "schema_sha256": sha256_hex(record.schema.as_bytes()),
        });
        let audit = Audit::admin_entry(&caller.tenant, &by, "policies.put", details);
        let stored = self
            .hooks
            .put_policies(&record, &audit)
            .await
            .map_err(failed)?;
        let compiled = policies.map(|policies| {
            Arc::new(Compiled {
                policies: Ok(policies),
                mode,
                version: stored.version,
            })
        });
        self.book
            .installed(caller.tenant.clone(), stored.version, compiled);
        // Where the store keeps the change's record apart (Redis): into the log now.
        if let Err(e) = self.audit.drain(&*self.hooks).await {
            tracing::warn!("a policy put's audit record waits to be appended: {e}");
        }
        Ok(Response::new(to_proto(&stored)))
    }

    #[instrument(name = "GetPolicies", skip_all, fields(tenant))]
    async fn get_policies(
        &self,
        request: Request<GetPoliciesRequest>,
    ) -> Result<Response<PolicySet>, Status> {
        let _timer = self.gate.timer("GetPolicies");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let stored = self
            .hooks
            .policies(&caller.tenant)
            .await
            .map_err(failed)?
            .unwrap_or_default();
        Ok(Response::new(to_proto(&stored)))
    }

    #[instrument(name = "TestPolicies", skip_all, fields(tenant))]
    async fn test_policies(
        &self,
        request: Request<TestPoliciesRequest>,
    ) -> Result<Response<TestPoliciesResponse>, Status> {
        let _timer = self.gate.timer("TestPolicies");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let test = request.into_inner();
        let ask = test.ask.unwrap_or_default();
        let Some(action) = ask.action.as_deref() else {
            return Err(failed(Error::bad_request(
                "ask.action",
                "is what the policies decide: name one",
            )));
        };
        let arguments = arguments(&action.arguments_json).map_err(failed)?;
        let set = match test.text.is_empty() && test.schema.is_empty() {
            // A candidate set, tested before it is put.
            false => compile(test.text, test.schema)
                .await
                .map_err(failed)?
                .2
                .map(|policies| Set::Candidate(Box::new(policies))),
            true => self
                .book
                .current(&caller.tenant)
                .await
                .map_err(failed)?
                .map(Set::Stored),
        };
        let Some(set) = set else {
            return Ok(Response::new(TestPoliciesResponse {
                decision: "no_match".into(),
                ..Default::default()
            }));
        };
        let policies = match set.policies() {
            Ok(policies) => policies,
            Err(broken) => {
                return Ok(Response::new(tested(
                    Decision::NotJudged(format!("the stored policy set: {broken}")),
                    Vec::new(),
                )));
            }
        };
        let subject = match test.subject.as_str() {
            "" => caller.sub.as_str(),
            subject => subject,
        };
        let groups = match test.groups.is_empty() {
            true => caller.groups.clone(),
            false => test.groups,
        };
        let (decision, policy_ids) = policies.judge(&Asked {
            subject,
            groups: &groups,
            action: &action.name,
            session: &ask.session_id,
            arguments: &arguments,
            labels: &ask.labels,
        });
        Ok(Response::new(tested(decision, policy_ids)))
    }
}

/// The policies a test judges with: a candidate set, or the tenant's.
enum Set {
    Candidate(Box<Policies>),
    Stored(Arc<Compiled>),
}

impl Set {
    fn policies(&self) -> Result<&Policies, &str> {
        match self {
            Self::Candidate(policies) => Ok(policies),
            Self::Stored(compiled) => compiled.policies.as_ref().map_err(String::as_str),
        }
    }
}

/// Longest a put waits for its set to compile.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(30);

/// `text` and `schema` compiled (off the async workers: a large set takes a while),
/// and given back; no policies for an empty text. BAD_REQUEST with Cedar's message
/// when they do not parse or fit.
async fn compile(
    text: String,
    schema: String,
) -> Result<(String, String, Option<Policies>), Error> {
    let compiling = tokio::task::spawn_blocking(move || {
        let compiled = match text.trim().is_empty() && schema.trim().is_empty() {
            true => Ok(None),
            false => Policies::new(&text, &schema).map(Some),
        };
        (text, schema, compiled)
    });
    let (text, schema, compiled) = tokio::time::timeout(COMPILE_TIMEOUT, compiling)
        .await
        .map_err(|_| Error::Internal("compiling the policy set took too long".into()))?
        .map_err(|e| Error::Internal(format!("compiling the policy set failed: {e}")))?;
    let field = match compiled.as_ref() {
        Err(why) if why.starts_with("the schema") => "schema",
        _ => "text",
    };
    let policies = compiled.map_err(|why| Error::bad_request(field, why))?;
    // A schema alone holds no policy.
    let policies = policies.filter(|p| !p.is_empty());
    Ok((text, schema, policies))
}

/// An action's arguments as the policies see them: its JSON object (none: `{}`).
fn arguments(json: &str) -> Result<serde_json::Value, Error> {
    match json.trim() {
        "" => Ok(serde_json::Value::Object(Default::default())),
        text => serde_json::from_str(text)
            .map_err(|e| Error::bad_request("ask.action.arguments_json", e.to_string())),
    }
}

/// A test's answer for `decision`.
fn tested(decision: Decision, policy_ids: Vec<String>) -> TestPoliciesResponse {
    let (name, reasons, fill) = match decision {
        Decision::Deny { reason, .. } => ("deny", vec![reason], None),
        Decision::Allow { .. } => ("allow", Vec::new(), None),
        Decision::Ask { fill, .. } => ("ask", Vec::new(), Some(fill)),
        Decision::NoMatch => ("no_match", Vec::new(), None),
        Decision::NotJudged(why) => ("not_judged", vec![why], None),
    };
    TestPoliciesResponse {
        decision: name.into(),
        policy_ids,
        reasons,
        fill: fill.map(|fill| PolicyFill {
            approvers: approvers(&fill.approvers),
            quorum: fill.quorum.unwrap_or_default(),
            ttl_ms: fill
                .ttl
                .map_or(0, |t| t.as_millis().try_into().unwrap_or(u64::MAX)),
            default_option: fill.default.unwrap_or_default(),
        }),
    }
}

/// A stored set as the API shows it.
fn to_proto(set: &PolicySetRecord) -> PolicySet {
    PolicySet {
        text: set.text.clone(),
        mode: set.mode.as_str().into(),
        schema: set.schema.clone(),
        version: set.version,
        updated_at: (set.version > 0)
            .then(|| (std::time::UNIX_EPOCH + Duration::from_millis(set.updated_ms)).into()),
        policy_ids: set.policy_ids.clone(),
    }
}
