//! `askgate serve --config FILE` (`ASKGATE_CONFIG`): every serve flag as a TOML
//! setting, named like the flag without its dashes (`listen = "0.0.0.0:50051"`,
//! `redis-url = "redis://redis:6379"`, `cors-origin = ["https://app.example.com"]`).
//! The command line wins over the environment, which wins over the file, which wins
//! over the defaults: a manifest can mount one file and still override a setting with
//! an `ASKGATE_*` variable.

use std::{ffi::OsString, path::Path};

use clap::{ArgAction, ArgMatches, Command, parser::ValueSource};

/// The file's settings as command-line arguments for those `serve` flags that neither
/// the command line nor the environment set. `command` is the `serve` subcommand and
/// `matches` its parse without the file.
pub fn file_args(
    path: &Path,
    command: &Command,
    matches: &ArgMatches,
) -> Result<Vec<OsString>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("failed to read --config {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("--config {} is not valid TOML: {e}", path.display()))?;
    let mut args = Vec::new();
    for (key, value) in table {
        let name = key.replace('_', "-");
        let arg = command
            .get_arguments()
            .find(|arg| {
                let long = arg.get_long() == Some(name.as_str());
                let alias = arg
                    .get_visible_aliases()
                    .is_some_and(|aliases| aliases.contains(&name.as_str()));
                (long || alias) && name != "config"
            })
            .ok_or_else(|| {
                format!(
                    "unknown setting {key:?} in {}: settings are `askgate serve` flags \
                     without the dashes (see askgate serve --help)",
                    path.display()
                )
            })?;
        let given = matches!(
            matches.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if given {
            continue;
        }
        let flag = matches!(arg.get_action(), ArgAction::SetTrue);
        let values = match value {
            toml::Value::Array(items) => items,
            single => vec![single],
        };
        for value in values {
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(true) if flag => {
                    args.push(format!("--{name}").into());
                    continue;
                }
                toml::Value::Boolean(false) if flag => continue,
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(format!(
                        "setting {key:?} in {}: expected a string, number or boolean, got {}",
                        path.display(),
                        other.type_str()
                    ));
                }
            };
            args.push(format!("--{}={text}", arg.get_long().unwrap_or(&name)).into());
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::cli::{Cli, Command, parse};

    /// `askgate serve --config FILE FLAGS…` with `file` as the file's contents.
    fn parse_with(file: &str, flags: &[&str]) -> Result<Cli, String> {
        let dir = std::env::temp_dir().join(format!("askgate-config-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("askgate.toml");
        std::fs::write(&path, file).expect("write the file");
        let mut args = vec![
            "askgate",
            "serve",
            "--config",
            path.to_str().expect("utf-8"),
        ];
        args.extend(flags);
        let parsed = parse(args.into_iter().map(Into::into).collect());
        let _ = std::fs::remove_dir_all(&dir);
        parsed.map_err(|e| e.to_string())
    }

    fn serve(file: &str, flags: &[&str]) -> Result<crate::cli::ServeArgs, String> {
        match parse_with(file, flags)? {
            Cli {
                command: Command::Serve(serve),
                ..
            } => Ok(*serve),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_file_sets_what_the_command_line_does_not() {
        let args = serve(
            r#"
                listen = "0.0.0.0:6000"
                backend = "redis"
                redis_url = "redis://redis:6379"
                redis-lease = "20s"
                max-questions = 8
                redis-cluster = true
                allow-anonymous = false
                console = false
                cors-origin = ["https://a.example", "https://b.example"]
            "#,
            &["--max-questions", "4"],
        )
        .expect("parses");
        assert_eq!(args.listen.to_string(), "0.0.0.0:6000");
        assert_eq!(
            args.backend.redis_url.as_deref(),
            Some("redis://redis:6379")
        );
        assert_eq!(args.backend.redis_lease, Duration::from_secs(20));
        assert_eq!(args.limits.max_questions, 4, "the command line wins");
        assert!(args.backend.redis_cluster);
        assert!(!args.auth.allow_anonymous);
        assert!(!args.http.console);
        assert_eq!(
            args.http.cors_origins,
            ["https://a.example", "https://b.example"]
        );
    }

    #[test]
    fn a_flag_may_be_set_by_its_other_name() {
        let args = serve(
            "allowed-origin = [\"https://a.example\"]\npublic-url = \"https://q.example\"\n",
            &[],
        )
        .expect("parses");
        assert_eq!(args.http.cors_origins, ["https://a.example"]);
        assert_eq!(args.http.public_url.as_deref(), Some("https://q.example"));
    }

    #[test]
    fn the_file_may_set_the_global_log_filter() {
        let cli = parse_with("log = \"askgate_service=debug\"\n", &[]).expect("parses");
        assert_eq!(cli.log.as_deref(), Some("askgate_service=debug"));
    }

    #[test]
    fn unknown_or_malformed_settings_are_refused_with_the_file_named() {
        let error = serve("lisen = \"0.0.0.0:1\"\n", &[]).expect_err("a typo");
        assert!(error.contains("unknown setting \"lisen\""), "{error}");
        let error = serve("listen = \n", &[]).expect_err("not TOML");
        assert!(error.contains("is not valid TOML"), "{error}");
        let error = serve("max-questions = \"many\"\n", &[]).expect_err("not a number");
        assert!(error.contains("many"), "{error}");
        let error = serve("[listen]\nport = 1\n", &[]).expect_err("a table");
        assert!(
            error.contains("expected a string, number or boolean"),
            "{error}"
        );
    }
}
