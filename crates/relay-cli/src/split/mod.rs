//! `relay split`: start, list, renew, stop and tidy up the splits of the stored routes
//! document, creating and deleting the destinations `--create` makes for them.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use relay_core::config::Settings;
use relay_core::live::{DEFAULT_SPLIT_MAX_TTL, SplitSpec, Timestamp};
use relay_core::sink::{
    FileSinkConfig, FileTarget, PubSubConfig, Selection, SinkSpec, SnsConfig, SqsConfig, Target,
};
use serde_json::Value;

use crate::document::{self, IfUnparsable, StoreArgs};
use crate::error::CliError;
mod backfill;
mod create;
mod queue;
mod topic;

use self::backfill::backfill;
use self::create::{Created, delete_created};

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
        /// How long from now, e.g. 30m, 8h, 2d; the split lasts at most RELAY_SPLIT_MAX_TTL_SECS
        /// (7 days unless set) from its registration.
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
    /// How long the split lasts, e.g. 30s, 45m, 8h; at most RELAY_SPLIT_MAX_TTL_SECS (7 days
    /// unless set).
    #[arg(long, default_value = "8h", value_parser = parse_ttl)]
    ttl: Duration,
    /// Deliver to the routes as well, not instead.
    #[arg(long)]
    copy: bool,
    /// Let --match read $request (the path, the query, the headers), which no sender signs.
    #[arg(long)]
    accept_unsigned: bool,
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
    /// Once the relays take the split, replay to it the archived notifications it matches that
    /// arrived this long ago or since, e.g. 1h, 24h (needs RELAY_ARCHIVE_URL and
    /// RELAY_LEDGER_URL, as the relays have them): each once, however it arrives, backfilled or
    /// live.
    #[arg(long, value_name = "DURATION", value_parser = parse_backfill)]
    backfill: Option<Duration>,
    /// A jq program whose one value, as compact JSON, is what your destination receives
    /// instead of the payload, e.g. '{bundle: .match.bundle_uuid, event: .event_type}'.
    #[arg(long, value_name = "PROGRAM")]
    transform: Option<String>,
    /// The name prefix of created queues, which the relay may send to: the Terraform output
    /// split_prefix.
    #[arg(long, env = "RELAY_SPLIT_PREFIX", default_value = "relay-split-")]
    split_prefix: String,
}

fn parse_backfill(text: &str) -> Result<Duration, CliError> {
    let window = humantime::parse_duration(text).map_err(CliError::from)?;
    match window.is_zero() {
        true => Err(CliError::invalid("a backfill window is longer than zero")),
        false => Ok(window),
    }
}

fn parse_ttl(text: &str) -> Result<Duration, CliError> {
    let ttl = humantime::parse_duration(text).map_err(CliError::from)?;
    if ttl.is_zero() {
        return Err(CliError::invalid("a split lasts longer than zero"));
    }
    if Timestamp::checked_after(SystemTime::now(), ttl).is_none() {
        return Err(CliError::invalid(
            "too long: a split must end by 9999-12-31T23:59:59Z",
        ));
    }
    Ok(ttl)
}

/// `at` to the second, as the document writes it.
fn to_the_second(at: SystemTime) -> Timestamp {
    let seconds = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Timestamp(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// The longest a split may last: `RELAY_SPLIT_MAX_TTL_SECS` of the relay's configuration
/// (`--config` or `RELAY_CONFIG`, else the variable alone), 7 days unless set.
fn max_ttl(store: &StoreArgs) -> Result<Duration, CliError> {
    if let Some(deployed) = document::deployed(store)? {
        return Ok(deployed.split_max_ttl());
    }
    const VAR: &str = "RELAY_SPLIT_MAX_TTL_SECS";
    let (settings, errors) = Settings::from_vars(&|name: &str| {
        (name == VAR).then(|| std::env::var(name).ok()).flatten()
    });
    if let Some((var, message)) = errors.first() {
        return Err(CliError::Invalid(format!("{var}: {message}")));
    }
    match settings.split_max_ttl_secs {
        Some(secs) if secs.0 == 0 => Err(CliError::Invalid(format!("{VAR}: must be at least 1"))),
        Some(secs) => Ok(Duration::from_secs(secs.0)),
        None => Ok(DEFAULT_SPLIT_MAX_TTL),
    }
}

/// Refuses a `--ttl` longer than the longest a split may last.
fn within(ttl: Duration, max: Duration) -> Result<(), CliError> {
    if ttl > max {
        return Err(CliError::Invalid(format!(
            "--ttl {}: a split lasts at most {} (RELAY_SPLIT_MAX_TTL_SECS={})",
            humantime::format_duration(ttl),
            humantime::format_duration(max),
            max.as_secs()
        )));
    }
    Ok(())
}

/// The expiry of a split that lasts `ttl` from `now`, to the second.
fn expiry(now: SystemTime, ttl: Duration) -> Result<Timestamp, CliError> {
    Timestamp::checked_after(now, ttl)
        .map(|at| to_the_second(at.0))
        .ok_or_else(|| {
            CliError::invalid("--ttl: too long: a split must end by 9999-12-31T23:59:59Z")
        })
}

pub(crate) fn split(command: SplitCommand) -> ExitCode {
    document::run("split", async move {
        match command {
            SplitCommand::Start(args) => start(*args).await,
            SplitCommand::List { store, json } => list(&store, json).await,
            SplitCommand::Renew { store, name, ttl } => {
                let max = max_ttl(&store)?;
                within(ttl, max)?;
                let expires = expiry(SystemTime::now(), ttl)?;
                document::update(&store, IfUnparsable::Refuse, |document| {
                    let split = document
                        .splits
                        .iter_mut()
                        .find(|s| s.name == name)
                        .ok_or_else(|| CliError::Invalid(format!("no split named {name:?}")))?;
                    let lasts = expires
                        .0
                        .duration_since(split.registered_at.0)
                        .unwrap_or_default();
                    if lasts > max {
                        let latest = Timestamp::checked_after(split.registered_at.0, max)
                            .map_or_else(|| "the end of 9999".into(), |t| t.to_string());
                        return Err(CliError::Invalid(format!(
                            "split {name} was registered at {}; a split lasts at most {} from its registration (RELAY_SPLIT_MAX_TTL_SECS={}), until {latest}: stop it and start a new one",
                            split.registered_at,
                            humantime::format_duration(max),
                            max.as_secs()
                        )));
                    }
                    split.expires_at = expires;
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
                let removed = remove_splits(&store, |s| s.name == name).await?;
                if removed.is_empty() {
                    return Err(CliError::Invalid(format!("no split named {name:?}")));
                }
                println!("split {name} stopped; its notifications follow the routes again");
                if !keep_queue {
                    delete_created(&removed).await?;
                }
                Ok(())
            }
            SplitCommand::Gc { store } => {
                let now = SystemTime::now();
                let removed = remove_splits(&store, |s| s.expires_at.0 <= now).await?;
                for split in &removed {
                    println!("removed the expired split {}", split.name);
                }
                delete_created(&removed).await
            }
        }
    })
}

/// Removes the splits `which` selects, with compare-and-swap; returns those removed by the
/// write that succeeded.
async fn remove_splits(
    store: &StoreArgs,
    which: impl Fn(&SplitSpec) -> bool,
) -> Result<Vec<SplitSpec>, CliError> {
    document::update(store, IfUnparsable::Refuse, |document| {
        let (gone, kept) = std::mem::take(&mut document.splits)
            .into_iter()
            .partition(|s| which(s));
        document.splits = kept;
        Ok(gone)
    })
    .await
}

/// The destination `--queue-url`, `--topic-arn`, `--topic` or `--file` names, if one does.
fn given_destination(args: &StartArgs) -> Result<Option<Target>, CliError> {
    let parsed =
        |flag: &str, e: relay_core::InvalidValue| CliError::Invalid(format!("{flag}: {e}"));
    Ok(Some(
        match (&args.queue_url, &args.topic_arn, &args.topic, &args.file) {
            (Some(url), ..) => Target::Sqs(SqsConfig::new(
                url.parse().map_err(|e| parsed("--queue-url", e))?,
            )),
            (_, Some(arn), ..) => Target::Sns(SnsConfig::new(
                arn.parse().map_err(|e| parsed("--topic-arn", e))?,
            )),
            (_, _, Some(topic), _) => Target::PubSub(PubSubConfig::new(
                topic.parse().map_err(|e| parsed("--topic", e))?,
            )),
            (_, _, _, Some(path)) => Target::File(FileSinkConfig {
                path: path.parse().map_err(|e| parsed("--file", e))?,
            }),
            _ => return Ok(None),
        },
    ))
}

/// Where a destination is, as `relay split start` was told or made it.
fn address(target: &Target) -> String {
    match target {
        Target::File(file) => file.path.to_string(),
        Target::Sqs(queue) => queue.queue_url.to_string(),
        Target::Sns(topic) => topic.topic_arn.to_string(),
        Target::PubSub(topic) => topic.topic.to_string(),
    }
}

/// A split of `args` to `target`, registered at `now`.
fn split_of(
    args: &StartArgs,
    pattern: &Value,
    target: Target,
    now: SystemTime,
) -> Result<SplitSpec, CliError> {
    Ok(SplitSpec {
        name: args.name.clone(),
        pattern: pattern.clone(),
        to: SinkSpec {
            target,
            selection: Selection {
                transform: args.transform.clone(),
                ..Selection::default()
            },
        },
        copy: args.copy,
        registered_at: to_the_second(now),
        expires_at: expiry(now, args.ttl)?,
        created: false,
        accept_unsigned: args.accept_unsigned,
    })
}

async fn start(args: StartArgs) -> Result<(), CliError> {
    let pattern: Value = serde_json::from_str(&args.pattern)
        .map_err(|e| CliError::Invalid(format!("--match: not JSON: {e}")))?;
    // The document is TOML, which has no null.
    toml::Value::try_from(&pattern).map_err(|e| CliError::Invalid(format!("--match: {e}")))?;
    if let Some(program) = &args.transform {
        relay_core::transform::Program::compile(program)
            .map_err(|e| CliError::Invalid(format!("--transform: {e}")))?;
    }
    // The split is checked before a destination is made for it.
    let max = max_ttl(&args.store)?;
    within(args.ttl, max)?;
    let stdout = Target::File(FileSinkConfig {
        path: FileTarget::Stdout,
    });
    split_of(&args, &pattern, stdout, SystemTime::now())?
        .check(max)
        .map_err(CliError::from)?;
    let given = given_destination(&args)?;
    let created = create::create(&args).await?;
    let target = match (&created, given) {
        (Some(created), _) => created.target(),
        (None, Some(given)) => Ok(given),
        (None, None) => Err(CliError::invalid("name a destination")),
    };
    let written = match target {
        Ok(target) => match split_of(&args, &pattern, target, SystemTime::now()) {
            Ok(mut split) => {
                split.created = created.is_some();
                let name = &args.name;
                document::update(&args.store, IfUnparsable::Refuse, |document| {
                    if document.splits.iter().any(|s| &s.name == name) {
                        return Err(CliError::Invalid(format!(
                            "a split named {name:?} exists; `relay split renew {name}` extends it"
                        )));
                    }
                    document.splits.push(split.clone());
                    Ok(split.clone())
                })
                .await
            }
            Err(problem) => Err(problem),
        },
        Err(problem) => Err(problem),
    };
    let split = match written {
        Ok(split) => split,
        Err(problem) => {
            // Nothing routes to what was made for it: take it away again.
            if let Some(created) = &created {
                created.delete().await?;
            }
            return Err(problem);
        }
    };
    println!(
        "split {} started: {} {}, until {}",
        split.name,
        split.to.target.kind(),
        address(&split.to.target),
        split.expires_at
    );
    match &created {
        Some(Created::Queue(url)) => println!(
            "read it with: aws sqs receive-message --queue-url {url} --message-attribute-names All --wait-time-seconds 20"
        ),
        Some(Created::Topic(topic)) => println!(
            "read it with: gcloud pubsub subscriptions pull {} --auto-ack --limit=10",
            topic::subscription_of(topic)
        ),
        None => {}
    }
    if let Some(window) = args.backfill {
        backfill(&args, &pattern, window).await?;
    }
    Ok(())
}

async fn list(args: &StoreArgs, json: bool) -> Result<(), CliError> {
    let store = document::open(args).await?;
    let stored = document::read(store.as_ref()).await?;
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
