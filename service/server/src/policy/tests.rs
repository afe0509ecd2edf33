use super::*;

/// The schema of docs/policy.md's worked examples: a coding agent's Bash and a deploy.
const SCHEMA: &str = r#"
action Bash appliesTo {
  principal: Agent, resource: Session,
  context: { arguments: { command: String, description?: String }, labels: Set<String> }
};
action deploy appliesTo {
  principal: Agent, resource: Session,
  context: { arguments: { service: String, env: String }, labels: Set<String> }
};
"#;

const POLICIES: &str = r#"
@id("read-only") @decision("allow")
permit(principal, action == Action::"Bash", resource)
when { context.arguments.command == "git status" || context.arguments.command like "ls*" };

@id("destructive") @reason("rm -rf is never run by an agent")
forbid(principal, action == Action::"Bash", resource)
when { context.arguments.command like "*rm -rf*" };

@id("staging") @decision("allow")
permit(principal, action == Action::"deploy", resource)
when { context.arguments.env == "staging" && principal.groups.contains("deployers") };

@id("prod") @decision("ask") @approvers("group:sre, ana") @quorum("2") @ttl("15m") @default("Reject")
permit(principal, action == Action::"deploy", resource)
when { context.arguments.env == "prod" };
"#;

fn policies() -> Policies {
    Policies::new(POLICIES, SCHEMA).expect("the worked set is valid")
}

fn decide(
    policies: &Policies,
    groups: &[&str],
    action: &str,
    arguments: serde_json::Value,
) -> Decision {
    let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
    let labels = HashMap::from([("team".to_owned(), "platform".to_owned())]);
    policies.decide(&Asked {
        subject: "deploy-bot",
        groups: &groups,
        action,
        session: "ops/1",
        arguments: &arguments,
        labels: &labels,
    })
}

#[test]
fn a_forbid_denies_with_its_reason_whatever_permits_say() {
    let set = policies();
    let denied = decide(
        &set,
        &[],
        "Bash",
        serde_json::json!({ "command": "ls; rm -rf /" }),
    );
    assert_eq!(
        denied,
        Decision::Deny {
            policy: "destructive".into(),
            reason: "rm -rf is never run by an agent".into(),
        }
    );
}

#[test]
fn an_allowing_permit_allows_and_an_asking_one_fills_the_ask() {
    let set = policies();
    assert_eq!(
        decide(
            &set,
            &[],
            "Bash",
            serde_json::json!({ "command": "git status" })
        ),
        Decision::Allow {
            policy: "read-only".into()
        }
    );
    assert_eq!(
        decide(
            &set,
            &["deployers"],
            "deploy",
            serde_json::json!({ "service": "api", "env": "staging" })
        ),
        Decision::Allow {
            policy: "staging".into()
        }
    );
    assert_eq!(
        decide(
            &set,
            &[],
            "deploy",
            serde_json::json!({ "service": "api", "env": "prod" })
        ),
        Decision::Ask {
            policy: "prod".into(),
            fill: Fill {
                approvers: vec!["group:sre".into(), "ana".into()],
                quorum: Some(2),
                ttl: Some(Duration::from_secs(15 * 60)),
                default: Some("Reject".into()),
            },
        }
    );
}

#[test]
fn nothing_matching_or_an_ask_that_does_not_fit_is_asked() {
    let set = policies();
    // Staging, but not a deployer: no permit matches.
    assert_eq!(
        decide(
            &set,
            &[],
            "deploy",
            serde_json::json!({ "service": "api", "env": "staging" })
        ),
        Decision::NoMatch
    );
    assert_eq!(
        decide(&set, &[], "Bash", serde_json::json!({ "command": "make" })),
        Decision::NoMatch
    );
    for (action, arguments) in [
        ("Edit", serde_json::json!({ "file": "a.rs" })),
        ("deploy", serde_json::json!({ "service": "api" })),
        (
            "deploy",
            serde_json::json!({ "service": "api", "env": "prod", "force": true }),
        ),
        ("Bash", serde_json::json!({ "command": 7 })),
    ] {
        let decided = decide(&set, &[], action, arguments.clone());
        assert!(
            matches!(decided, Decision::NotJudged(_)),
            "{action} {arguments}: {decided:?}"
        );
    }
}

#[test]
fn a_set_that_does_not_parse_validate_or_say_its_decision_is_refused() {
    let refused = |policies: &str| Policies::new(policies, SCHEMA).err().unwrap_or_default();
    assert!(refused("permit(principal, action, resource").contains("the policy set"));
    let unknown =
        refused(r#"@decision("allow") permit(principal, action == Action::"Nope", resource);"#);
    assert!(unknown.contains("does not fit the schema"), "{unknown}");
    let typo = refused(
        r#"@decision("allow") permit(principal, action == Action::"deploy", resource) when { context.arguments.enviroment == "x" };"#,
    );
    assert!(typo.contains("does not fit the schema"), "{typo}");
    let bare = refused(r#"permit(principal, action == Action::"deploy", resource);"#);
    assert!(
        bare.contains("@decision is needed on every permit"),
        "{bare}"
    );
    let forbid = refused(r#"@decision("ask") forbid(principal, action, resource);"#);
    assert!(forbid.contains("belongs on a permit"), "{forbid}");
    let quorum =
        refused(r#"@decision("ask") @quorum("many") permit(principal, action, resource);"#);
    assert!(quorum.contains("@quorum"), "{quorum}");
    let ttl = refused(r#"@decision("ask") @ttl("soon") permit(principal, action, resource);"#);
    assert!(ttl.contains("@ttl"), "{ttl}");
    let twice = refused(
        r#"@id("a") @decision("ask") permit(principal, action, resource);
           @id("a") @decision("allow") permit(principal, action, resource);"#,
    );
    assert!(twice.contains("two policies are named \"a\""), "{twice}");
    let schema = Policies::new("", "action deploy appliesTo { principal: Nobody };").err();
    assert!(schema.unwrap_or_default().contains("the schema"));
    assert!(Policies::new("", SCHEMA).expect("an empty set").is_empty());
}

#[test]
fn of_several_matching_policies_the_first_in_the_set_names_the_decision() {
    let mut text = String::new();
    for i in 0..12 {
        text.push_str(&format!(
            "@id(\"deny-{i}\") @reason(\"reason {i}\")\nforbid(principal, action == Action::\"deploy\", resource);\n"
        ));
    }
    let set = Policies::new(&text, SCHEMA).expect("valid");
    assert_eq!(set.len(), 12);
    let decided = decide(
        &set,
        &[],
        "deploy",
        serde_json::json!({ "service": "api", "env": "prod" }),
    );
    assert_eq!(
        decided,
        Decision::Deny {
            policy: "deny-0".into(),
            reason: "reason 0".into(),
        }
    );
}

#[test]
fn a_policy_is_judged_whatever_action_its_scope_names() {
    // Without a schema: one action, a list of them, or any.
    let set = Policies::new(
        r#"
        @id("reads") @decision("allow")
        permit(principal, action in [Action::"Read", Action::"Grep"], resource);
        @id("bash") @decision("ask")
        permit(principal, action == Action::"Bash", resource);
        @id("nothing-on-friday") @reason("frozen")
        forbid(principal, action, resource) when { context.labels.contains("day=friday") };
        "#,
        "",
    )
    .expect("valid");
    let judge = |action: &str, day: &str| {
        let labels = HashMap::from([("day".to_owned(), day.to_owned())]);
        set.judge(&Asked {
            subject: "bot",
            groups: &[],
            action,
            session: "s",
            arguments: &serde_json::json!({ "n": 1, "deep": { "list": [true, "x"] } }),
            labels: &labels,
        })
    };
    let name = |decision: Decision| match decision {
        Decision::Allow { policy }
        | Decision::Ask { policy, .. }
        | Decision::Deny { policy, .. } => policy,
        other => format!("{other:?}"),
    };
    assert_eq!(name(judge("Read", "monday").0), "reads");
    assert_eq!(name(judge("Grep", "monday").0), "reads");
    assert_eq!(name(judge("Bash", "monday").0), "bash");
    assert_eq!(judge("Write", "monday").0, Decision::NoMatch);
    for action in ["Read", "Bash", "Write"] {
        let (decision, matched) = judge(action, "friday");
        assert_eq!(name(decision), "nothing-on-friday", "{action}");
        assert!(matched.contains(&"nothing-on-friday".to_owned()));
    }
    // An argument Cedar has no value for: not judged, so asked.
    let labels = HashMap::new();
    let odd = set.decide(&Asked {
        subject: "bot",
        groups: &[],
        action: "Read",
        session: "s",
        arguments: &serde_json::json!({ "ratio": 0.5 }),
        labels: &labels,
    });
    assert!(matches!(odd, Decision::NotJudged(_)), "{odd:?}");
}

#[test]
fn with_a_schema_an_action_group_is_judged_through_its_members() {
    let schema = r#"
        action writes;
        action Edit in [writes] appliesTo {
          principal: Agent, resource: Session,
          context: { arguments: { file_path: String }, labels: Set<String> }
        };
    "#;
    let set = Policies::new(
        r#"@id("writes") @decision("ask") permit(principal, action in Action::"writes", resource);"#,
        schema,
    )
    .expect("valid");
    let labels = HashMap::new();
    let decided = set.decide(&Asked {
        subject: "bot",
        groups: &[],
        action: "Edit",
        session: "s",
        arguments: &serde_json::json!({ "file_path": "a.rs" }),
        labels: &labels,
    });
    assert!(
        matches!(decided, Decision::Ask { ref policy, .. } if policy == "writes"),
        "{decided:?}"
    );
}
