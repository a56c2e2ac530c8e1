//! The stored routes document behind `relay routes` and `relay split`: where it is, reading it,
//! and changing it without losing anyone's update. Every change reads the document into a
//! [`StoredRoutes`], edits that, writes it back as TOML, checks the text as the relay will read
//! it, and stores it only if nobody wrote in between; on a conflict it reads again.
//!
//! The document is rewritten in TOML's canonical form: comments in it are not kept.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use relay_core::cloud::Cloud;
use relay_core::live::store::{self, Fetched, Store, Version, WriteError};
use relay_core::live::{Routes, RoutesUrl, StoredRoutes, check_document};
use relay_core::{Config, DocumentError};

use crate::error::CliError;

/// How to get out of a stored document that does not parse, said with every refusal.
const HOW_TO_REPLACE: &str = "`relay routes put FILE` replaces a document that does not parse";

/// Where the stored routes are, and the deployed configuration to check changes against.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The stored routes document: a path, s3://bucket/key or gs://bucket/object.
    #[arg(long = "routes", env = "RELAY_ROUTES_URL", value_name = "URL")]
    url: RoutesUrl,
    /// The relay's configuration file (instead of RELAY_CONFIG), to check changes against the
    /// deployed sinks and routes. Without one, only the document itself is checked.
    #[arg(long)]
    config: Option<String>,
}

impl StoreArgs {
    /// The stored routes document's URL.
    pub(crate) fn url(&self) -> &RoutesUrl {
        &self.url
    }

    /// The relay's configuration file, when given.
    pub(crate) fn config(&self) -> Option<&str> {
        self.config.as_deref()
    }
}

/// What a change does with a stored document that does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfUnparsable {
    /// Refuse, and say how to replace it.
    Refuse,
    /// Start from an empty document (its splits are lost, and said so).
    Replace,
}

/// Runs the work of `relay <what>` on a runtime of its own; prints its error as
/// `relay <what>: …`.
pub(crate) fn run(what: &str, work: impl Future<Output = Result<(), CliError>>) -> ExitCode {
    crate::run::finish(what, crate::run::on_this_thread(work), 1, |()| {
        ExitCode::SUCCESS
    })
}

/// The routes a relay with `config` has in effect now: the deployed ones merged with the stored
/// document when `RELAY_ROUTES_URL` names one, and that document's version.
pub(crate) fn routes_in_effect(config: &Config) -> Result<(Routes, Option<Version>), CliError> {
    let deployed = config.routes();
    let Some(url) = &config.routes_url else {
        return Ok((deployed, None));
    };
    crate::run::on_this_thread(async {
        let store = store::open(url, config.routes_max_bytes, &Cloud::default())
            .await
            .map_err(CliError::from)?;
        match store.read(None).await.map_err(CliError::from)? {
            Fetched::Document { text, version } => {
                let stored = StoredRoutes::parse(&text)
                    .map_err(|e| CliError::Invalid(format!("stored routes {}:{e}", store.url())))?;
                let routes = deployed.merge(&stored).map_err(|e| {
                    CliError::Invalid(format!(
                        "stored routes {} (version {version}): {e}",
                        store.url()
                    ))
                })?;
                Ok((routes, Some(version)))
            }
            Fetched::Missing | Fetched::Unchanged => Ok((deployed, None)),
        }
    })
}

/// The deployed sinks and routes, when a configuration is given or in the environment.
pub(crate) fn deployed(args: &StoreArgs) -> Result<Option<Routes>, CliError> {
    let given = args.config.is_some() || std::env::var_os("RELAY_CONFIG").is_some();
    match Config::from_vars(crate::env_with_config(args.config.as_deref())) {
        Ok(config) => Ok(Some(config.routes())),
        Err(errors) if given => Err(CliError::Invalid(format!(
            "the relay configuration is invalid:\n{errors}"
        ))),
        Err(_) => Ok(None),
    }
}

/// The store `args` names.
pub(crate) async fn open(args: &StoreArgs) -> Result<Box<dyn Store>, CliError> {
    store::open(&args.url, store::DEFAULT_MAX_BYTES, &Cloud::default())
        .await
        .map_err(CliError::from)
}

/// The stored text and its version; none when there is no document.
async fn fetch(store: &dyn Store) -> Result<Option<(String, Version)>, CliError> {
    match store.read(None).await.map_err(CliError::from)? {
        Fetched::Missing | Fetched::Unchanged => Ok(None),
        Fetched::Document { text, version } => Ok(Some((text, version))),
    }
}

/// Why the stored document does not parse, at its place in the store.
fn unparsable(store: &dyn Store, error: &DocumentError) -> String {
    format!("{}:{error}", store.url())
}

/// The stored document (empty when there is none); one that does not parse is refused.
pub(crate) async fn read(store: &dyn Store) -> Result<StoredRoutes, CliError> {
    match fetch(store).await? {
        None => Ok(StoredRoutes::default()),
        Some((text, _)) => StoredRoutes::parse(&text)
            .map_err(|e| CliError::Invalid(format!("{}; {HOW_TO_REPLACE}", unparsable(store, &e)))),
    }
}

/// The stored document as TOML, whether or not the relay would take it (empty when there is
/// none), and its version: what `relay routes show` prints. Text that is not TOML is refused.
pub(crate) async fn read_toml(
    store: &dyn Store,
) -> Result<(toml::Table, Option<Version>), CliError> {
    match fetch(store).await? {
        None => Ok((toml::Table::new(), None)),
        Some((text, version)) => {
            let table = toml::from_str(&text).map_err(|e| {
                CliError::Invalid(format!(
                    "{}: {}; {HOW_TO_REPLACE}",
                    store.url(),
                    e.message()
                ))
            })?;
            Ok((table, Some(version)))
        }
    }
}

/// The document as stored: TOML without the empty `[sinks]`, `routes` or `splits`, which say
/// nothing.
fn to_text(document: &StoredRoutes) -> Result<String, CliError> {
    let mut table = toml::Table::try_from(document).map_err(CliError::from)?;
    table.retain(|_, value| match value {
        toml::Value::Table(table) => !table.is_empty(),
        toml::Value::Array(array) => !array.is_empty(),
        _ => true,
    });
    toml::to_string(&table).map_err(CliError::from)
}

/// Reads the document, applies `edit`, checks the result and writes it if nobody wrote in
/// between; reads again and retries on a conflict. Returns what `edit` returned on the read
/// that was written.
pub(crate) async fn update<T>(
    args: &StoreArgs,
    if_unparsable: IfUnparsable,
    mut edit: impl FnMut(&mut StoredRoutes) -> Result<T, CliError>,
) -> Result<T, CliError> {
    const ATTEMPTS: u32 = 50;
    let store = open(args).await?;
    let deployed = deployed(args)?;
    for attempt in 0..ATTEMPTS {
        let fetched = fetch(store.as_ref()).await?;
        let version = fetched.as_ref().map(|(_, version)| version.clone());
        let mut document = match fetched.map(|(text, _)| StoredRoutes::parse(&text)) {
            None => StoredRoutes::default(),
            Some(Ok(document)) => document,
            Some(Err(e)) if if_unparsable == IfUnparsable::Replace => {
                let e = unparsable(store.as_ref(), &e);
                eprintln!("{e}; replacing it whole (any splits in it are lost)");
                StoredRoutes::default()
            }
            Some(Err(e)) => {
                return Err(CliError::Invalid(format!(
                    "{}; {HOW_TO_REPLACE}",
                    unparsable(store.as_ref(), &e)
                )));
            }
        };
        let edited = edit(&mut document)?;
        let text = to_text(&document)?;
        check_document(&text, deployed.as_ref()).map_err(CliError::from)?;
        match store.write(version.as_ref(), &text).await {
            Ok(version) => {
                eprintln!("{}: version {version}", store.url());
                return Ok(edited);
            }
            Err(WriteError::Conflict) => {
                // Someone wrote in between: back off a little, differently for each writer.
                let jitter = u64::from(std::process::id() % 7 + attempt % 5);
                tokio::time::sleep(Duration::from_millis(2 + jitter * 3)).await;
            }
            Err(WriteError::Store(e)) => return Err(e.into()),
        }
    }
    Err(CliError::Incomplete(format!(
        "{}: the document kept changing; gave up after {ATTEMPTS} attempts",
        store.url()
    )))
}
