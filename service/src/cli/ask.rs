//! `askgate ask`: one question from flags, or a whole `AskRequest` as JSON; waits for
//! the answer and prints the `AskResponse` as JSON.

use std::{process::ExitCode, time::Duration};

use askgate_client::{Ask, Reason, question};
use askgate_proto::v1::{
    Action, Approvers, AskRequest, EscalationStep, Quorum, Resolution, Unattended,
};
use clap::Args;

use super::common::{
    ConnectArgs, EXIT_DEFAULTED, EXIT_USAGE, fail, fail_local, parse_duration, parse_pair,
};
use super::{answer, json};

#[derive(Debug, Clone, Args)]
pub struct AskArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Session to ask in (overrides session_id of --json).
    #[arg(long, env = "ASKGATE_SESSION")]
    pub session: Option<String>,
    /// The question text (the simple case: one question).
    #[arg(long, conflicts_with = "json")]
    pub question: Option<String>,
    /// Id of that question.
    #[arg(long, default_value = "q1")]
    pub id: String,
    /// Short header of that question.
    #[arg(long)]
    pub header: Option<String>,
    /// Longer detail of that question.
    #[arg(long)]
    pub detail: Option<String>,
    /// An option, `LABEL` or `LABEL=DESCRIPTION`; repeat for more. None: free text.
    #[arg(long = "option")]
    pub options: Vec<String>,
    /// Let the human pick several options.
    #[arg(long)]
    pub multi: bool,
    /// Present the question as a plan review; the value is the approving option label.
    #[arg(long)]
    pub plan_review: Option<String>,
    /// A whole AskRequest as JSON (proto JSON, as grpcurl takes it); `-` for stdin.
    #[arg(long)]
    pub json: Option<String>,
    /// How long to wait for the answer (the gRPC deadline).
    #[arg(long, env = "ASKGATE_TIMEOUT", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Keep the question pending while nobody is subscribed (instead of NO_PROVIDER).
    #[arg(long)]
    pub hold: bool,
    /// Ask as this attached agent (see `askgate attach`); needs --incarnation.
    #[arg(long, env = "ASKGATE_AGENT_ID", requires = "incarnation")]
    pub agent_id: Option<String>,
    /// The incarnation printed by `askgate attach`.
    #[arg(long, env = "ASKGATE_INCARNATION", requires = "agent_id")]
    pub incarnation: Option<String>,
    /// Idempotency key: a retry with the same session, request id, questions and
    /// approval flags joins the same ask, or gets its answer (anything else:
    /// REQUEST_ID_REUSED). Default: the --json file's request_id, else a fresh one.
    #[arg(long)]
    pub request_id: Option<String>,
    /// How long the question stays answerable if this process dies, for a rerun with
    /// the same --request-id to pick the answer up; 0s aborts it at once.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub reattach_grace: Duration,
    /// How long to keep retrying while every attempt fails (the node drains, the
    /// server is unreachable); the last error is reported then. The retries rejoin
    /// the same ask through its request id.
    #[arg(long, env = "ASKGATE_RETRY_FOR", default_value = "60s", value_parser = parse_duration)]
    pub retry_for: Duration,
    /// A label shown to the UIs, `KEY=VALUE`; repeat for more.
    #[arg(long = "label", value_parser = parse_pair)]
    pub labels: Vec<(String, String)>,
    /// Remind (subscribers and webhooks) this long after the ask if it is still
    /// pending (at least 1s).
    #[arg(long, value_parser = parse_duration)]
    pub remind_after: Option<Duration>,
    /// Then remind again every this long (at least 1s).
    #[arg(long, value_parser = parse_duration, requires = "remind_after")]
    pub remind_every: Option<Duration>,
    /// At most this many reminders (default: no limit).
    #[arg(long, requires = "remind_after")]
    pub max_reminders: Option<u32>,
    /// Escalate once this long after the ask if it is still pending (at least 1s).
    #[arg(long, value_parser = parse_duration)]
    pub escalate_after: Option<Duration>,
    /// Approval: the action the answer approves, e.g. `deploy` (docs/approvals.md);
    /// the first option of the first question approves it, and an approving answer
    /// carries a signed receipt for it.
    #[arg(long)]
    pub action: Option<String>,
    /// The action's arguments: a JSON object, or `@FILE` (`@-` for stdin); default `{}`.
    #[arg(long, requires = "action")]
    pub arguments: Option<String>,
    /// Distinct people whose same answers resolve the ask (2 to 10).
    #[arg(long)]
    pub quorum: Option<u32>,
    /// How long the ask stays answerable whatever its caller does; then it resolves
    /// with its --default answers (DEFAULTED, exit code 10), or ASK_EXPIRED.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// The answer given when the --ttl runs out: `QUESTION_ID=LABEL`; repeat for
    /// several labels or questions.
    #[arg(long = "default", value_parser = parse_pair)]
    pub default_select: Vec<(String, String)>,
    /// A free-text default answer: `QUESTION_ID=TEXT`.
    #[arg(long, value_parser = parse_pair)]
    pub default_text: Vec<(String, String)>,
    /// Only this channel may resolve the ask (`console`, `cli`, `tui`, `slack`,
    /// `telegram`, `email`, `mcp`, `grpc`, ...); repeat for several.
    #[arg(long = "allowed-channel")]
    pub allowed_channels: Vec<String>,
    /// Only these people may answer: subjects (`ana`, `slack:T1/U2`, `telegram:42`,
    /// `email:ana@example.org`) and `group:NAME` for a credential's group, comma
    /// separated or repeated. Anyone else gets NOT_AN_APPROVER.
    #[arg(long, value_delimiter = ',')]
    pub approvers: Vec<String>,
    /// Only the --approvers may cancel the ask too.
    #[arg(long, requires = "approvers")]
    pub approvers_cancel_too: bool,
    /// An escalation step: `AFTER[;approvers=A,B,group:G][;notify=ID,ID][;replace]`
    /// (`10m;approvers=group:sre;notify=sl_0123`): after AFTER, with the ask pending,
    /// the approvers join (or replace) the ask's and the channel connections are sent
    /// it. Repeat, in time order, for several.
    #[arg(long = "escalate", value_parser = parse_step)]
    pub escalation: Vec<EscalationStep>,
}

/// `--escalate`'s step.
fn parse_step(spec: &str) -> Result<EscalationStep, String> {
    let mut parts = spec.split(';').map(str::trim);
    let after = parse_duration(parts.next().unwrap_or_default())?;
    let mut step = EscalationStep {
        after_ms: u64::try_from(after.as_millis()).map_err(|_| "too long")?,
        ..Default::default()
    };
    for part in parts {
        match part.split_once('=') {
            Some(("approvers", names)) => {
                let names: Vec<String> = names.split(',').map(str::to_owned).collect();
                step.approvers = Some(approvers(&names, false));
            }
            Some(("notify", ids)) => {
                step.notify_channels = ids
                    .split(',')
                    .map(str::trim)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            None if part == "replace" => step.replace = true,
            _ => {
                return Err(format!(
                    "{part:?}: a step is AFTER[;approvers=A,B][;notify=ID,ID][;replace]"
                ));
            }
        }
    }
    Ok(step)
}

impl AskArgs {
    fn request(&self) -> Result<AskRequest, String> {
        let mut request = match (&self.json, &self.question) {
            (Some(path), _) => {
                let text = json::read_input(path).map_err(|e| format!("{e:#}"))?;
                json::from_json("askgate.v1.AskRequest", &text).map_err(|e| format!("{e:#}"))?
            }
            (None, Some(text)) => {
                let mut q = question(&self.id, text);
                if let Some(header) = &self.header {
                    q = q.header(header);
                }
                if let Some(detail) = &self.detail {
                    q = q.detail(detail);
                }
                for option in &self.options {
                    q = match option.split_once('=') {
                        Some((label, description)) => q.option(label, description),
                        None => q.choice(option),
                    };
                }
                if self.multi {
                    q = q.multi_select();
                }
                if let Some(approve) = &self.plan_review {
                    q = q.plan_review(approve);
                }
                AskRequest {
                    questions: vec![q.build()],
                    ..Default::default()
                }
            }
            (None, None) => return Err("give --question TEXT or --json FILE".into()),
        };
        if let Some(session) = &self.session {
            request.session_id = session.clone();
        }
        if request.session_id.is_empty() {
            return Err("give --session (or session_id in the JSON)".into());
        }
        if self.hold {
            request.if_unattended = Unattended::Hold.into();
        }
        request.labels.extend(self.labels.iter().cloned());
        if self.remind_after.is_some() || self.escalate_after.is_some() {
            let ms = |d: Option<Duration>| {
                d.map_or(Ok(0), |d| {
                    u32::try_from(d.as_millis())
                        .map_err(|_| "a notify interval must be under 49 days")
                })
            };
            request.notify = Some(askgate_proto::v1::NotifyPolicy {
                remind_after_ms: ms(self.remind_after)?,
                remind_every_ms: ms(self.remind_every)?,
                max_reminders: self.max_reminders.unwrap_or(0),
                escalate_after_ms: ms(self.escalate_after)?,
            });
        }
        self.approval(&mut request)?;
        Ok(request)
    }

    /// The approval fields the flags give, over those of --json.
    fn approval(&self, request: &mut AskRequest) -> Result<(), String> {
        if let Some(name) = &self.action {
            let arguments_json = json::arguments(self.arguments.as_deref())?;
            request.action = Some(Box::new(Action {
                name: name.clone(),
                arguments_json,
                approving_answers: Vec::new(),
            }));
        }
        if let Some(count) = self.quorum {
            request.quorum = Some(Quorum { count });
        }
        if let Some(ttl) = self.ttl {
            request.ttl_ms = u64::try_from(ttl.as_millis()).map_err(|_| "--ttl is too long")?;
        }
        let defaults = answer::answers_of(&self.default_select, &self.default_text, &[]);
        if !defaults.is_empty() {
            request.default_answers = defaults;
        }
        if !self.allowed_channels.is_empty() {
            request.allowed_channels = self.allowed_channels.clone();
        }
        if !self.escalation.is_empty() {
            request.escalation = self.escalation.clone();
        }
        if !self.approvers.is_empty() {
            request.approvers = Some(Box::new(approvers(
                &self.approvers,
                self.approvers_cancel_too,
            )));
        }
        Ok(())
    }
}

/// `--approvers`' names: `group:NAME` a group, anything else a subject.
fn approvers(names: &[String], cancel_too: bool) -> Approvers {
    let mut approvers = Approvers {
        cancel_too,
        ..Default::default()
    };
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        match name.strip_prefix("group:") {
            Some(group) => approvers.groups.push(group.to_owned()),
            None => approvers.subjects.push(name.to_owned()),
        }
    }
    approvers
}

pub async fn run(args: AskArgs) -> ExitCode {
    let request = match args.request() {
        Ok(request) => request,
        Err(e) => return fail_local(e, EXIT_USAGE),
    };
    // The first connect is retried like any attempt, within --retry-for: an agent
    // started before its server waits for it. Said at once, as a person needs it.
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) if e.is_unreachable() && !args.retry_for.is_zero() => {
            eprintln!(
                "askgate: {}\naskgate: retrying for up to {} (--retry-for)",
                e.message(),
                humantime::format_duration(args.retry_for)
            );
            match args.connect.connect_lazy() {
                Ok(client) => client,
                Err(e) => return fail(&e),
            }
        }
        Err(e) => return fail(&e),
    };
    let session = request.session_id.clone();
    // --request-id, else the JSON's, else a fresh one. Named here, so that the waiting
    // line can give it: running the same file again finds the same ask.
    let request_id = match (&args.request_id, request.request_id.as_str()) {
        (Some(flag), _) => flag.clone(),
        (None, "") => uuid::Uuid::new_v4().to_string(),
        (None, from_json) => from_json.to_owned(),
    };
    let mut ask = Ask::from(request)
        .reattach_grace(args.reattach_grace)
        .retry_for(args.retry_for);
    if let Some(timeout) = args.timeout {
        ask = ask.timeout(timeout);
    }
    ask = ask.request_id(&request_id);
    if let (Some(agent_id), Some(incarnation)) = (&args.agent_id, &args.incarnation) {
        ask = ask.agent(agent_id, incarnation);
    }
    // Said on stderr: stdout stays for the answer's JSON.
    eprintln!(
        "askgate: asking in session {session} (request_id {request_id}); waiting for an answer \
         from `askgate answer --session {session}`{}",
        console_url(&args.connect.addr, &session)
            .map(|url| format!(" or the console at {url}"))
            .unwrap_or_default()
    );
    match client.ask(ask).await {
        Ok(response) => match json::to_json("askgate.v1.AskResponse", &response) {
            Ok(line) => {
                println!("{line}");
                if response.resolution() == Resolution::Defaulted {
                    eprintln!(
                        "askgate: nobody answered within the ask's ttl: it resolved with its \
                         default answers (DEFAULTED, exit code {EXIT_DEFAULTED})"
                    );
                    return ExitCode::from(EXIT_DEFAULTED);
                }
                if response.resolution() == Resolution::AllowedByPolicy {
                    eprintln!(
                        "askgate: the tenant's policy allowed the action ({}): nobody was asked",
                        response.resolved_by
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail_local(format!("{e:#}"), 1),
        },
        Err(e) => {
            if e.reason() == Reason::NoProvider {
                // The error's text stays as agents know it; a person gets the way out
                // (before the JSON error, which stays the last line).
                eprintln!(
                    "askgate: nobody follows session {session}: start `askgate answer --session \
                     {session}`{} first, or pass --hold to wait until someone does",
                    console_url(&args.connect.addr, &session)
                        .map(|url| format!(" (or open the console at {url})"))
                        .unwrap_or_default()
                );
            }
            fail(&e.at(&args.connect.url()))
        }
    }
}

/// The console's page of `session` on the server at `addr` (the console is served on
/// the gRPC listener), or None for an address that is not a URL.
fn console_url(addr: &str, session: &str) -> Option<String> {
    let base = addr.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return None;
    }
    let session: String = form_urlencoded::byte_serialize(session.as_bytes()).collect();
    // As the console writes it (encodeURIComponent, `/` kept).
    Some(format!(
        "{base}/console/#/sessions/{}",
        session.replace("%2F", "/").replace('+', "%20")
    ))
}
