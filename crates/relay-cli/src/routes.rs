//! `relay routes`: show the stored routes document, replace its sinks and routes, or remove one
//! stored route.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use relay_core::live::StoredRoutes;

use crate::document::{self, IfUnparsable, StoreArgs};
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub(crate) enum RoutesCommand {
    /// Print the stored document and its version.
    Show {
        #[command(flatten)]
        store: StoreArgs,
        /// As JSON: {"version": …, "document": {…}}.
        #[arg(long)]
        json: bool,
    },
    /// Replace the stored sinks and routes with those of FILE; splits are kept.
    Put {
        #[command(flatten)]
        store: StoreArgs,
        /// A TOML file of [sinks.<name>] and [[routes]].
        file: std::path::PathBuf,
        /// What the deployed relay may send to: the Terraform output stored_sink_allowed, ARNs
        /// and Pub/Sub topic ids, comma-separated (an entry ending in `*` covers every name it
        /// starts); repeatable. Each SQS, SNS or Pub/Sub sink of FILE that none covers draws a
        /// warning; the exit code is that of the write. Without it nothing is checked.
        #[arg(long, value_name = "ARN_OR_TOPIC,...", value_delimiter = ',')]
        allowed: Vec<String>,
    },
    /// Remove one stored route, and the stored sinks no stored route names any more.
    Remove {
        #[command(flatten)]
        store: StoreArgs,
        /// The route's name.
        name: String,
    },
}

pub(crate) fn routes(command: RoutesCommand) -> ExitCode {
    document::run("routes", async move {
        match command {
            RoutesCommand::Show { store, json } => show(&store, json).await,
            RoutesCommand::Put {
                store,
                file,
                allowed,
            } => put(&store, &file, &allowed).await,
            RoutesCommand::Remove { store, name } => remove(&store, &name).await,
        }
    })
}

/// Prints the document as stored, even one the relay would refuse, as long as it is TOML.
async fn show(args: &StoreArgs, json: bool) -> Result<(), CliError> {
    let store = document::open(args).await?;
    let (document, version) = document::read_toml(store.as_ref()).await?;
    let version = version.map(|v| v.0);
    if json {
        let document = serde_json::to_value(&document).map_err(CliError::from)?;
        println!(
            "{}",
            serde_json::json!({"version": version, "document": document})
        );
    } else {
        println!(
            "# {}: version {}",
            store.url(),
            version.as_deref().unwrap_or("none (no document)")
        );
        print!("{}", toml::to_string(&document).map_err(CliError::from)?);
    }
    Ok(())
}

/// Replaces the stored sinks and routes with those of `file`, keeping the splits; replaces a
/// stored document that does not parse whole. Warns about the sinks outside `allowed`.
async fn put(args: &StoreArgs, file: &Path, allowed: &[String]) -> Result<(), CliError> {
    let text = std::fs::read_to_string(file).map_err(|e| CliError::Read {
        path: file.display().to_string(),
        source: e,
    })?;
    // Splits are refused by their key alone, whatever is in them.
    let keys: toml::Table = toml::from_str(&text)
        .map_err(|e| CliError::Invalid(format!("{}: {}", file.display(), e.message())))?;
    if keys.contains_key("splits") {
        return Err(CliError::invalid(
            "splits are changed with `relay split`, not `relay routes put`",
        ));
    }
    let given = StoredRoutes::parse(&text)
        .map_err(|e| CliError::Invalid(format!("{}:{e}", file.display())))?;
    for warning in crate::allowed::warnings(&given.sinks, allowed) {
        eprintln!("relay routes: {warning}");
    }
    document::update(args, IfUnparsable::Replace, |document| {
        document.sinks.clone_from(&given.sinks);
        document.routes.clone_from(&given.routes);
        Ok(())
    })
    .await
}

/// Removes the stored route `name`, refusing a deployed one.
async fn remove(args: &StoreArgs, name: &str) -> Result<(), CliError> {
    if let Some(deployed) = document::deployed(args)?
        && deployed.has_deployed_route(name)
    {
        return Err(CliError::Invalid(format!(
            "route {name:?} is deployed (RELAY_CONFIG or the variables); remove it there"
        )));
    }
    document::update(args, IfUnparsable::Refuse, |document| {
        remove_route(document, name)
    })
    .await
}

/// Removes the stored route `name`, then the stored sinks no stored route names.
fn remove_route(document: &mut StoredRoutes, name: &str) -> Result<(), CliError> {
    let before = document.routes.len();
    document.routes.retain(|route| route.name != name);
    if document.routes.len() == before {
        return Err(CliError::Invalid(format!("no stored route named {name:?}")));
    }
    let named: BTreeSet<&String> = document.routes.iter().flat_map(|r| &r.to).collect();
    document.sinks.retain(|sink, _| named.contains(sink));
    Ok(())
}
