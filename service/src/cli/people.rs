//! `askgate people`: the tenant's people (the `People` service, admin role): the
//! identities that count as one person on every channel, their groups, and who answers
//! for them while they are away. Each command prints its result as one line of JSON.

use std::{
    process::ExitCode,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{Delegate, Identity, ListPeopleResponse, Person};
use clap::{Args, Subcommand};

use super::{
    common::{ConnectArgs, EXIT_USAGE, fail, fail_local},
    json,
    webhooks::ConnectOnly,
};

#[derive(Debug, Clone, Subcommand)]
pub enum PeopleCommand {
    /// Add a person, or replace the one with that id.
    Put(PutArgs),
    /// List the tenant's people.
    List(ConnectOnly),
    /// Remove a person.
    Delete(PersonIdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The person's id (1-64 of `A-Z a-z 0-9 . _ @ -`).
    pub id: String,
    /// The name shown for them.
    #[arg(long, default_value = "")]
    pub name: String,
    /// A group an ask's approvers may name; repeat for several.
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// `KIND:VALUE`, KIND one of subject, slack (`slack:T0123/U0456`), telegram
    /// (`telegram:42`), email (`email:ana@example.org`); repeat for several.
    #[arg(long = "identity", value_parser = parse_identity)]
    pub identities: Vec<Identity>,
    /// The person who answers for them while they are away (with --away-for).
    #[arg(long, requires = "away_for")]
    pub delegate_to: Option<String>,
    /// How long from now the delegation holds (`7d`, `36h`).
    #[arg(long, value_parser = super::common::parse_duration, requires = "delegate_to")]
    pub away_for: Option<Duration>,
}

#[derive(Debug, Clone, Args)]
pub struct PersonIdArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The person's id.
    pub id: String,
}

/// `KIND:VALUE` as an identity.
fn parse_identity(text: &str) -> Result<Identity, String> {
    let (kind, value) = text
        .split_once(':')
        .ok_or("an identity is KIND:VALUE (subject:ana, slack:T0123/U0456, telegram:42, email:ana@example.org)")?;
    Ok(Identity {
        kind: kind.to_owned(),
        value: value.to_owned(),
    })
}

pub async fn run(command: PeopleCommand) -> ExitCode {
    let connect = match &command {
        PeopleCommand::Put(args) => &args.connect,
        PeopleCommand::List(args) => &args.connect,
        PeopleCommand::Delete(args) => &args.connect,
    };
    let person = match &command {
        PeopleCommand::Put(args) => {
            let delegate = match (&args.delegate_to, args.away_for) {
                (Some(to_person), Some(away)) => match SystemTime::now().checked_add(away) {
                    Some(until) => Some(Delegate {
                        to_person: to_person.clone(),
                        until: Some(until.into()),
                    }),
                    None => return fail_local("--away-for is too long", EXIT_USAGE),
                },
                _ => None,
            };
            Some(Person {
                id: args.id.clone(),
                display_name: args.name.clone(),
                groups: args.groups.clone(),
                identities: args.identities.clone(),
                delegate,
            })
        }
        _ => None,
    };
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let result = match (&command, person) {
        (PeopleCommand::Delete(args), _) => client.delete_person(&args.id).await.map(|()| None),
        (_, Some(person)) => client
            .put_person(person)
            .await
            .map(|person| Some(json::print("askgate.v1.Person", &person))),
        (_, None) => client.list_people().await.map(|people| {
            Some(json::print(
                "askgate.v1.ListPeopleResponse",
                &ListPeopleResponse { people },
            ))
        }),
    };
    match result {
        Ok(printed) => printed.unwrap_or(ExitCode::SUCCESS),
        Err(e) => fail(&e),
    }
}
