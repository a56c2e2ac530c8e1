//! `relay routes` and `relay split`: read and change the stored routes document without losing
//! anyone's update. Every change reads the document, edits it, checks the result as the relay
//! will, and writes it back only if nobody wrote in between; on a conflict it reads again.
//!
//! The document is rewritten in TOML's canonical form: comments in it are not kept.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use relay_core::Config;
use relay_core::live::store::{self, Fetched, Store, Version, WriteError};
use relay_core::live::{Deployed, Plan, RoutesUrl, StoredRoutes, Timestamp, check_document};
use serde_json::Value;
use toml::Table;

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
    },
    /// Remove one stored route, and the stored sinks no stored route names any more.
    Remove {
        #[command(flatten)]
        store: StoreArgs,
        /// The route's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SplitCommand {
    /// Send the notifications that match PATTERN to your own destination until the split
    /// expires. Splits come before routes; where splits overlap, the earliest registered wins.
    Start(Box<StartArgs>),
    /// List the splits, expired ones included.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Push a split's expiry to TTL from now.
    Renew {
        #[command(flatten)]
        store: StoreArgs,
        /// The split's name.
        name: String,
        /// How long from now, e.g. 30m, 8h, 2d.
        #[arg(long, default_value = "8h", value_parser = parse_ttl)]
        ttl: Duration,
    },
    /// End a split: its notifications go back to the routes. A queue `--create` made is
    /// deleted.
    Stop {
        #[command(flatten)]
        store: StoreArgs,
        /// The split's name.
        name: String,
        /// Keep the queue `--create` made (delete it yourself).
        #[arg(long)]
        keep_queue: bool,
    },
    /// Remove the expired splits (the relay already ignores them).
    Gc {
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("destination").required(true)))]
pub(crate) struct StartArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The split's name: letters, digits, hyphens and underscores.
    name: String,
    /// A route pattern (JSON, the vocabulary of `match` in routes), e.g.
    /// '{"match":{"bundle_uuid":[{"prefix":"aa"}]}}'. One that matches everything is refused.
    #[arg(long = "match", value_name = "PATTERN")]
    pattern: String,
    /// How long the split lasts, e.g. 30s, 45m, 8h.
    #[arg(long, default_value = "8h", value_parser = parse_ttl)]
    ttl: Duration,
    /// Deliver to the routes as well, not instead.
    #[arg(long)]
    copy: bool,
    /// Your SQS queue.
    #[arg(long, group = "destination")]
    queue_url: Option<String>,
    /// Your SNS topic.
    #[arg(long, group = "destination")]
    topic_arn: Option<String>,
    /// Your Pub/Sub topic, projects/<project>/topics/<topic>.
    #[arg(long, group = "destination")]
    topic: Option<String>,
    /// A file on the relay's machine (local runs).
    #[arg(long, group = "destination")]
    file: Option<String>,
    /// Create the split's destination next to the relay's own (`--like`), named
    /// `<split prefix><name>-<random>`: an SQS queue, or a Pub/Sub topic with a pull
    /// subscription of the same name; `stop` and `gc` delete it.
    #[arg(long, group = "destination")]
    create: bool,
    /// The relay's own queue URL or Pub/Sub topic (projects/<p>/topics/<t>), which the created
    /// destination sits next to (same region or project; FIFO when the queue is): the Terraform
    /// output queue_url or topic_id.
    #[arg(long, env = "RELAY_SQS_QUEUE_URL", value_name = "QUEUE_URL_OR_TOPIC")]
    like: Option<String>,
    /// With --create on Pub/Sub: the member granted roles/pubsub.publisher on the created topic,
    /// the relay's service account (serviceAccount:<the Terraform output
    /// service_account_email>); the relay cannot publish there without it.
    #[arg(long, value_name = "MEMBER")]
    grant_to: Option<String>,
    /// The name prefix of created queues, which the relay may send to: the Terraform output
    /// split_prefix.
    #[arg(long, env = "RELAY_SPLIT_PREFIX", default_value = "relay-split-")]
    split_prefix: String,
}

/// The name of what `--create` makes for split `split`: `<prefix><split>-<6 hex digits>`. The
/// random suffix matters: SQS refuses a deleted queue's name for 60 seconds.
pub(crate) fn split_id(prefix: &str, split: &str) -> Result<String, String> {
    let mut suffix = [0u8; 3];
    getrandom::fill(&mut suffix).map_err(|e| format!("no randomness available: {e}"))?;
    Ok(format!("{prefix}{split}-{}", hex::encode(suffix)))
}

fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if ttl.is_zero() {
        return Err("a split lasts longer than zero".into());
    }
    Ok(ttl)
}

pub(crate) fn routes(command: RoutesCommand) -> ExitCode {
    run("routes", async move {
        match command {
            RoutesCommand::Show { store, json } => show(&store, json).await,
            RoutesCommand::Put { store, file } => {
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                let given: Table = toml::from_str(&text)
                    .map_err(|e| format!("{}: {}", file.display(), e.message()))?;
                if given.contains_key("splits") {
                    return Err(
                        "splits are changed with `relay split`, not `relay routes put`".into(),
                    );
                }
                update_or_replace(&store, true, |document| {
                    document.remove("sinks");
                    document.remove("routes");
                    document.extend(given.clone());
                    Ok(())
                })
                .await
            }
            RoutesCommand::Remove { store, name } => {
                if let Some(deployed) = deployed(&store)?
                    && deployed.routes.iter().any(|r| r.name == name)
                {
                    return Err(format!(
                        "route {name:?} is deployed (RELAY_CONFIG or the variables); remove it there"
                    ));
                }
                update(&store, |document| remove_route(document, &name)).await
            }
        }
    })
}

pub(crate) fn split(command: SplitCommand) -> ExitCode {
    run("split", async move {
        match command {
            SplitCommand::Start(args) => start(*args).await,
            SplitCommand::List { store, json } => list(&store, json).await,
            SplitCommand::Renew { store, name, ttl } => {
                let expires = Timestamp(SystemTime::now() + ttl).to_string();
                update(&store, |document| {
                    let split = find_split(document, &name)?;
                    split.insert("expires_at".into(), expires.clone().into());
                    Ok(())
                })
                .await?;
                println!("split {name} now expires at {expires}");
                Ok(())
            }
            SplitCommand::Stop {
                store,
                name,
                keep_queue,
            } => {
                let removed = remove_splits(&store, |s| name_of(s) == Some(&name)).await?;
                if removed.is_empty() {
                    return Err(format!("no split named {name:?}"));
                }
                println!("split {name} stopped; its notifications follow the routes again");
                if !keep_queue {
                    delete_created(&removed).await?;
                }
                Ok(())
            }
            SplitCommand::Gc { store } => {
                let now = SystemTime::now();
                let removed = remove_splits(&store, |s| expired(s, now)).await?;
                for split in &removed {
                    println!(
                        "removed the expired split {}",
                        name_of(split).map_or("?", |n| n)
                    );
                }
                delete_created(&removed).await
            }
        }
    })
}

/// The routes a relay with `config` has in effect now: the deployed ones merged with the stored
/// document when `RELAY_ROUTES_URL` names one, and that document's version.
pub(crate) fn plan_in_effect(config: &Config) -> Result<(Plan, Option<Version>), String> {
    let deployed = Deployed::from(config);
    let Some(url) = &config.routes_url else {
        return Ok((Plan::deployed(&deployed)?, None));
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let store = store::open(url).await.map_err(|e| e.to_string())?;
        match store.read(None).await.map_err(|e| e.to_string())? {
            Fetched::Document { text, version } => {
                let stored = StoredRoutes::parse(&text)
                    .map_err(|e| format!("stored routes {}:{e}", store.url()))?;
                let plan = Plan::merge(&deployed, &stored).map_err(|e| {
                    format!("stored routes {} (version {version}): {e}", store.url())
                })?;
                Ok((plan, Some(version)))
            }
            Fetched::Missing | Fetched::Unchanged => Ok((Plan::deployed(&deployed)?, None)),
        }
    })
}

/// Removes the splits `which` selects, with compare-and-swap; returns those removed by the
/// write that succeeded.
async fn remove_splits(
    store: &StoreArgs,
    which: impl Fn(&toml::Value) -> bool,
) -> Result<Vec<toml::Value>, String> {
    let removed = std::sync::Mutex::new(Vec::new());
    update(store, |document| {
        let (gone, kept): (Vec<_>, Vec<_>) = splits(document).drain(..).partition(|s| which(s));
        *splits(document) = kept;
        *removed.lock().expect("not poisoned") = gone;
        Ok(())
    })
    .await?;
    Ok(removed.into_inner().expect("not poisoned"))
}

/// Deletes the queues and topics that `--create` made for `removed` splits, once they are out
/// of the document (so no relay is left routing to a deleted destination).
async fn delete_created(removed: &[toml::Value]) -> Result<(), String> {
    for split in removed {
        if split.get("created").and_then(toml::Value::as_bool) != Some(true) {
            continue;
        }
        let to = |key: &str| {
            split
                .get("to")
                .and_then(|to| to.get(key))
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        };
        if let Some(url) = to("queue_url") {
            crate::split_queue::delete(&url).await?;
            println!("deleted the queue {url}");
        } else if let Some(topic) = to("topic") {
            crate::split_topic::delete(&topic).await?;
            println!("deleted the topic {topic} and its subscription");
        }
    }
    Ok(())
}

/// Runs `work` on a runtime of its own; prints its error as `relay <what>: …`.
fn run(what: &str, work: impl Future<Output = Result<(), String>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("relay {what}: cannot start: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("relay {what}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The deployed sinks and routes, when a configuration is given or in the environment.
fn deployed(args: &StoreArgs) -> Result<Option<Deployed>, String> {
    let given = args.config.is_some() || std::env::var_os("RELAY_CONFIG").is_some();
    match Config::from_vars(crate::env_with_config(args.config.as_deref())) {
        Ok(config) => Ok(Some(Deployed::from(&config))),
        Err(errors) if given => Err(format!("the relay configuration is invalid:\n{errors}")),
        Err(_) => Ok(None),
    }
}

async fn read(store: &dyn Store) -> Result<(Table, Option<Version>), String> {
    let (parsed, version) = read_any(store).await?;
    let table = parsed.map_err(|e| {
        format!("{e}; `relay routes put FILE` replaces a document that does not parse")
    })?;
    Ok((table, version))
}

/// The document and its version; the document may fail to parse (someone wrote it by hand).
async fn read_any(store: &dyn Store) -> Result<(Result<Table, String>, Option<Version>), String> {
    match store.read(None).await.map_err(|e| e.to_string())? {
        Fetched::Missing | Fetched::Unchanged => Ok((Ok(Table::new()), None)),
        Fetched::Document { text, version } => {
            let table =
                toml::from_str(&text).map_err(|e| format!("{}: {}", store.url(), e.message()));
            Ok((table, Some(version)))
        }
    }
}

/// Reads the document, applies `edit`, checks the result and writes it if nobody wrote in
/// between; reads again and retries on a conflict.
async fn update(
    args: &StoreArgs,
    edit: impl Fn(&mut Table) -> Result<(), String>,
) -> Result<(), String> {
    update_or_replace(args, false, edit).await
}

/// [`update`]; with `replace_unparsable`, a stored document that does not parse is replaced as
/// if it were empty (its splits are lost, and said so).
async fn update_or_replace(
    args: &StoreArgs,
    replace_unparsable: bool,
    edit: impl Fn(&mut Table) -> Result<(), String>,
) -> Result<(), String> {
    const ATTEMPTS: u32 = 50;
    let store = store::open(&args.url).await.map_err(|e| e.to_string())?;
    let deployed = deployed(args)?;
    for attempt in 0..ATTEMPTS {
        let (parsed, version) = read_any(store.as_ref()).await?;
        let mut document = match parsed {
            Ok(document) => document,
            Err(e) if replace_unparsable => {
                eprintln!("{e}; replacing it whole (any splits in it are lost)");
                Table::new()
            }
            Err(e) => {
                return Err(format!(
                    "{e}; `relay routes put FILE` replaces a document that does not parse"
                ));
            }
        };
        edit(&mut document)?;
        document.retain(|_, value| !is_empty(value));
        let text = toml::to_string(&document).map_err(|e| e.to_string())?;
        check_document(&text, deployed.as_ref())?;
        match store.write(version.as_ref(), &text).await {
            Ok(version) => {
                eprintln!("{}: version {version}", store.url());
                return Ok(());
            }
            Err(WriteError::Conflict) => {
                // Someone wrote in between: back off a little, differently for each writer.
                let jitter = u64::from(std::process::id() % 7 + attempt % 5);
                tokio::time::sleep(Duration::from_millis(2 + jitter * 3)).await;
            }
            Err(WriteError::Store(e)) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "{}: the document kept changing; gave up after {ATTEMPTS} attempts",
        store.url()
    ))
}

fn is_empty(value: &toml::Value) -> bool {
    match value {
        toml::Value::Table(t) => t.is_empty(),
        toml::Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

async fn show(args: &StoreArgs, json: bool) -> Result<(), String> {
    let store = store::open(&args.url).await.map_err(|e| e.to_string())?;
    let (document, version) = read(store.as_ref()).await?;
    let version = version.map(|v| v.0);
    if json {
        let document = serde_json::to_value(&document).map_err(|e| e.to_string())?;
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
        print!("{}", toml::to_string(&document).map_err(|e| e.to_string())?);
    }
    Ok(())
}

async fn start(args: StartArgs) -> Result<(), String> {
    let pattern: Value =
        serde_json::from_str(&args.pattern).map_err(|e| format!("--match: not JSON: {e}"))?;
    let pattern = toml::Value::try_from(&pattern).map_err(|e| format!("--match: {e}"))?;
    // The split is checked before a queue is made for it.
    let now = SystemTime::now();
    let probe = format!(
        "[[splits]]\nname = {}\nmatch = {pattern}\nto = {{ type = \"file\", path = \"-\" }}\nregistered_at = \"{}\"\nexpires_at = \"{}\"\n",
        toml::Value::from(args.name.clone()),
        Timestamp(now),
        Timestamp(now + args.ttl),
    );
    check_document(&probe, None)?;
    let created = match (args.create, &args.like) {
        (true, Some(like)) if like.starts_with("projects/") => {
            let Some(member) = &args.grant_to else {
                return Err("--create on Pub/Sub needs --grant-to serviceAccount:<the relay's service account>: without the grant the relay cannot publish to the topic".into());
            };
            let topic =
                crate::split_topic::create(like, &args.split_prefix, &args.name, member).await?;
            println!(
                "created the topic {topic} and its pull subscription {}",
                crate::split_topic::subscription_of(&topic)
            );
            Some(Created::Topic(topic))
        }
        (true, Some(like)) => {
            let url = crate::split_queue::create(like, &args.split_prefix, &args.name).await?;
            println!("created the queue {url}");
            Some(Created::Queue(url))
        }
        (true, None) => {
            return Err("--create needs --like <the relay's queue URL or Pub/Sub topic>".into());
        }
        (false, _) => None,
    };
    let mut to = Table::new();
    let (kind, key, value) = match (
        &created,
        &args.queue_url,
        &args.topic_arn,
        &args.topic,
        &args.file,
    ) {
        (Some(Created::Queue(url)), ..) | (None, Some(url), ..) => ("sqs", "queue_url", url),
        (Some(Created::Topic(topic)), ..) => ("pubsub", "topic", topic),
        (_, _, Some(arn), _, _) => ("sns", "topic_arn", arn),
        (_, _, _, Some(topic), _) => ("pubsub", "topic", topic),
        (_, _, _, _, Some(path)) => ("file", "path", path),
        _ => return Err("name a destination".into()),
    };
    to.insert("type".into(), kind.into());
    to.insert(key.into(), value.clone().into());
    let now = SystemTime::now();
    let mut split = Table::new();
    split.insert("name".into(), args.name.clone().into());
    split.insert("match".into(), pattern);
    split.insert("to".into(), to.into());
    if args.copy {
        split.insert("copy".into(), true.into());
    }
    if created.is_some() {
        split.insert("created".into(), true.into());
    }
    split.insert("registered_at".into(), Timestamp(now).to_string().into());
    let expires = Timestamp(now + args.ttl).to_string();
    split.insert("expires_at".into(), expires.clone().into());
    let name = args.name.clone();
    let written = update(&args.store, |document| {
        if splits(document).iter().any(|s| name_of(s) == Some(&name)) {
            return Err(format!(
                "a split named {name:?} exists; `relay split renew {name}` extends it"
            ));
        }
        splits(document).push(split.clone().into());
        Ok(())
    })
    .await;
    if let Err(problem) = written {
        // Nothing routes to what was made for it: take it away again.
        match &created {
            Some(Created::Queue(url)) => crate::split_queue::delete(url).await?,
            Some(Created::Topic(topic)) => crate::split_topic::delete(topic).await?,
            None => {}
        }
        return Err(problem);
    }
    println!(
        "split {} started: {kind} {value}, until {expires}",
        args.name
    );
    match &created {
        Some(Created::Queue(url)) => println!(
            "read it with: aws sqs receive-message --queue-url {url} --message-attribute-names All --wait-time-seconds 20"
        ),
        Some(Created::Topic(topic)) => println!(
            "read it with: gcloud pubsub subscriptions pull {} --auto-ack --limit=10",
            crate::split_topic::subscription_of(topic)
        ),
        None => {}
    }
    Ok(())
}

/// What `--create` made for a split.
enum Created {
    /// An SQS queue, by URL.
    Queue(String),
    /// A Pub/Sub topic, by name, with a pull subscription of the same id.
    Topic(String),
}

async fn list(args: &StoreArgs, json: bool) -> Result<(), String> {
    let store = store::open(&args.url).await.map_err(|e| e.to_string())?;
    let (document, _) = read(store.as_ref()).await?;
    let stored: StoredRoutes = toml::to_string(&document)
        .map_err(|e| e.to_string())
        .and_then(|text| StoredRoutes::parse(&text))?;
    let now = SystemTime::now();
    if json {
        let splits: Vec<Value> = stored
            .splits
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "match": s.pattern,
                    "to": s.to.target.describe(),
                    "copy": s.copy,
                    "registered_at": s.registered_at.to_string(),
                    "expires_at": s.expires_at.to_string(),
                    "expired": s.expires_at.0 <= now,
                })
            })
            .collect();
        println!("{}", Value::Array(splits));
        return Ok(());
    }
    if stored.splits.is_empty() {
        println!("no splits");
    }
    for s in &stored.splits {
        let state = if s.expires_at.0 <= now {
            "expired"
        } else {
            "active"
        };
        println!(
            "{}  {state} until {}  {}{}  match {}",
            s.name,
            s.expires_at,
            s.to.target.describe(),
            if s.copy { " (copy)" } else { "" },
            s.pattern
        );
    }
    Ok(())
}

/// The document's `[[splits]]`, created empty when missing.
fn splits(document: &mut Table) -> &mut Vec<toml::Value> {
    let entry = document
        .entry("splits")
        .or_insert_with(|| toml::Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = toml::Value::Array(Vec::new());
    }
    entry.as_array_mut().expect("an array")
}

fn name_of(split: &toml::Value) -> Option<&String> {
    match split.get("name")? {
        toml::Value::String(name) => Some(name),
        _ => None,
    }
}

fn expired(split: &toml::Value, now: SystemTime) -> bool {
    split
        .get("expires_at")
        .and_then(toml::Value::as_str)
        .and_then(|t| t.parse::<Timestamp>().ok())
        .is_some_and(|t| t.0 <= now)
}

fn find_split<'a>(document: &'a mut Table, name: &str) -> Result<&'a mut Table, String> {
    splits(document)
        .iter_mut()
        .find(|s| name_of(s).is_some_and(|n| n == name))
        .and_then(toml::Value::as_table_mut)
        .ok_or_else(|| format!("no split named {name:?}"))
}

/// Removes the stored route `name`, then the stored sinks no stored route names.
fn remove_route(document: &mut Table, name: &str) -> Result<(), String> {
    let Some(toml::Value::Array(routes)) = document.get_mut("routes") else {
        return Err(format!("no stored route named {name:?}"));
    };
    let before = routes.len();
    routes.retain(|r| r.get("name").and_then(toml::Value::as_str) != Some(name));
    if routes.len() == before {
        return Err(format!("no stored route named {name:?}"));
    }
    let named: Vec<String> = routes
        .iter()
        .filter_map(|r| r.get("to")?.as_array().cloned())
        .flatten()
        .filter_map(|sink| sink.as_str().map(str::to_owned))
        .collect();
    if let Some(toml::Value::Table(sinks)) = document.get_mut("sinks") {
        sinks.retain(|sink, _| named.iter().any(|n| n == sink));
    }
    Ok(())
}
