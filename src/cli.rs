//! The command line: `serve` (the default), `migrate`, `user create`, `user link-oidc`,
//! `token create`,
//! `policies export|plan|apply|import-envoy` (plan and apply in `policies`, import-envoy in
//! `import_envoy`).

mod import_envoy;
mod policies;
mod server_client;

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context;
use clap::{Parser, Subcommand};
use secrecy::SecretString;

use crate::auth::Actor;
use crate::config::Settings;
use crate::control::{ControlError, TokenInput};
use crate::policy_file;
use crate::startup::{Application, Core};
use crate::store::Store;

/// Where settings come from, for `--help` (every command reads them).
const SETTINGS_HELP: &str = "\
Settings: built-in defaults, then the TOML file named by RATEKEEPER_CONFIG (same names in
lower case, e.g. redis_prefix = \"prod\"), then these environment variables [defaults]:
  RATEKEEPER_LISTEN               address to serve on [127.0.0.1:8080]
  RATEKEEPER_DATABASE_URL         sqlite://, postgres:// or mysql:// URL [sqlite://ratekeeper.db]
  RATEKEEPER_DATABASE_TIMEOUT_MS  how long a request waits for a database connection [1000]
  RATEKEEPER_REDIS_URL            a redis:// URL, a cluster's (comma-separated), or
                                  redis+sentinel://host:26379,.../<master name> [redis://127.0.0.1:6379]
  RATEKEEPER_REDIS_PREFIX         prefix of every Redis key [ratekeeper]
  RATEKEEPER_REDIS_TIMEOUT_MS     timeout of an acquire's Redis call [100]
  RATEKEEPER_REDIS_STATE          a token bucket's state: packed (its own key) or hash [packed]
  RATEKEEPER_KEYED_EXPIRY         a keyed bucket's expiry: held (ahead) or exact [held]
  RATEKEEPER_SYNC_INTERVAL_MS     reconcile interval [5000]
  RATEKEEPER_WORKERS              HTTP worker threads [number of cores]
  RATEKEEPER_CONSOLE_CONCURRENCY  console requests worked on at once [half the cores, at least 1]
  RATEKEEPER_LOG_JSON             log JSON lines instead of text [false]
  RATEKEEPER_PUBLIC_URL           the console's address as users reach it [http:// and LISTEN]
  RATEKEEPER_WEBHOOK_ALLOW_PRIVATE  send webhooks to loopback and private addresses [false]
  RATEKEEPER_OIDC_ISSUER          the OpenID Connect provider to sign in with [none]
  RATEKEEPER_OIDC_CLIENT_ID       this server's client id there [none]
  RATEKEEPER_OIDC_CLIENT_SECRET   its client secret [none]
  RATEKEEPER_OIDC_NAME            the provider's name on the sign-in button [single sign-on]
  RATEKEEPER_OIDC_ADMIN_GROUP     members of this group (groups claim) are admins [none]
  RATEKEEPER_PASSWORD_SIGN_IN     people may sign in with a password [true]
  RUST_LOG                        log level [info]";

#[derive(Debug, Parser)]
#[command(
    name = "ratekeeper",
    version,
    about = "Admin-managed, multi-tenant rate limits decided in Redis",
    after_help = SETTINGS_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the APIs and the console (the default).
    #[command(after_help = SETTINGS_HELP)]
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Manage users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Manage personal access tokens for the admin API.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Policies as a file (YAML or JSON): exported from the database, planned and applied
    /// against a server (`--server`) or the database.
    Policies {
        #[command(subcommand)]
        command: PoliciesCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum PoliciesCommand {
    /// Print the policies of every application (or of one) as a policy file.
    Export {
        /// Only this application's policies.
        #[arg(long)]
        app: Option<String>,
        /// Write JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
    /// Print what applying a policy file would change, changing nothing.
    Plan(policies::FileTarget),
    /// Apply a policy file (its plan, made first, exactly) and print what changed.
    Apply(policies::FileTarget),
    /// Print the policy file of envoyproxy/ratelimit configs (YAML), one policy per
    /// descriptor with a rate limit, declaring the descriptor as its pattern.
    ImportEnvoy(import_envoy::ImportArgs),
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user; the password is read from the first line of stdin, never from argv.
    Create {
        name: String,
        /// Make the user a global admin.
        #[arg(long)]
        admin: bool,
    },
    /// Link a user to a person of the OpenID Connect provider (their `sub`, which the
    /// sign-in page shows them when their name is a user's already): they then sign in as
    /// this user.
    LinkOidc { name: String, sub: String },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print a new personal access token for a user, once, alone on its line.
    Create {
        name: String,
        /// A label to tell the user's tokens apart.
        #[arg(long, default_value = "cli")]
        label: String,
        /// When the token stops working by itself (RFC 3339, e.g. 2030-01-31T18:00:00Z);
        /// never when left out.
        #[arg(long)]
        expires_at: Option<String>,
        /// The token views what the user may view and changes nothing, whatever the
        /// user's role.
        #[arg(long)]
        read_only: bool,
    },
}

pub async fn run(cli: Cli, settings: Settings) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = Application::build(settings).await?;
            app.run_until_signalled().await
        }
        Command::Migrate => {
            let store = Store::connect(&settings.database_url).await?;
            store.migrate().await?;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::User {
            command: UserCommand::Create { name, admin },
        } => {
            let password = read_password()?;
            let core = Core::build(&settings).await?;
            let user = core
                .control
                .create_user(&Actor::operator(), &name, password, admin)
                .await
                .map_err(explain)?;
            eprintln!(
                "created {} user {}",
                if admin { "admin" } else { "member" },
                user.username
            );
            Ok(())
        }
        Command::User {
            command: UserCommand::LinkOidc { name, sub },
        } => {
            let core = Core::build(&settings).await?;
            core.control
                .link_oidc_user(&Actor::operator(), &name, &sub)
                .await
                .map_err(|e| match e {
                    ControlError::NotFound(_) => anyhow::anyhow!("there is no user named {name:?}"),
                    other => explain(other),
                })?;
            eprintln!("user {name} now signs in as the provider's {sub:?}");
            Ok(())
        }
        Command::Token {
            command:
                TokenCommand::Create {
                    name,
                    label,
                    expires_at,
                    read_only,
                },
        } => {
            let core = Core::build(&settings).await?;
            let input = TokenInput {
                label: Some(label),
                expires_at,
                read_only,
            };
            let token = core
                .control
                .create_token(&Actor::operator(), &name, &input)
                .await
                .map_err(|e| match e {
                    ControlError::NotFound(_) => anyhow::anyhow!(
                        "there is no user named {name:?} (make one with `ratekeeper user create {name}`)"
                    ),
                    other => explain(other),
                })?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", secrecy::ExposeSecret::expose_secret(&token))?;
            Ok(())
        }
        Command::Policies {
            command: PoliciesCommand::Export { app, json },
        } => {
            let core = Core::build(&settings).await?;
            let policies = core
                .control
                .list_policies(&Actor::operator(), app.as_deref())
                .await
                .map_err(|e| match e {
                    ControlError::NotFound(_) => {
                        anyhow::anyhow!("there is no application {:?}", app.unwrap_or_default())
                    }
                    other => explain(other),
                })?;
            let file = if json {
                policy_file::to_json(&policies)
            } else {
                policy_file::to_yaml(&policies)?
            };
            std::io::stdout().lock().write_all(file.as_bytes())?;
            Ok(())
        }
        Command::Policies {
            command: PoliciesCommand::Plan(target),
        } => policies::run(target, settings, false).await,
        Command::Policies {
            command: PoliciesCommand::Apply(target),
        } => policies::run(target, settings, true).await,
        Command::Policies {
            command: PoliciesCommand::ImportEnvoy(args),
        } => import_envoy::run(&args),
    }
}

/// The first line of stdin, without its line ending.
fn read_password() -> anyhow::Result<SecretString> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("Password (input is visible; pipe it in to avoid that): ");
        std::io::stderr().flush()?;
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from stdin")?;
    let password = line.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        anyhow::bail!(
            "no password on stdin: pipe it in, e.g. `printf '%s\\n' \"$PW\" | ratekeeper user create NAME`"
        );
    }
    Ok(SecretString::from(password))
}

/// Turns an admin error into a message for the operator.
fn explain(e: ControlError) -> anyhow::Error {
    match e {
        ControlError::Invalid(errors) => anyhow::anyhow!("invalid input: {errors}"),
        ControlError::Internal(cause) => cause,
        other => anyhow::anyhow!("{other}"),
    }
}
