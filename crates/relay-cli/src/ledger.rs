//! `relay ledger migrate`: copies a DynamoDB ledger table of the earlier layout (keyed by
//! `ledger_key` alone, with the index `by_bundle`) into a table of this release's (keyed by
//! `bundle_uuid` and `ledger_key`), so that an upgrade keeps what the relay remembers.

use std::process::ExitCode;

use relay_core::ledger::LedgerUrl;

use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum LedgerCommand {
    /// Copy the live entries of an earlier release's DynamoDB table into the ledger, each
    /// under its bundle; entries the ledger already holds are kept. Safe to run twice.
    Migrate {
        /// The earlier table: dynamodb://TABLE.
        #[arg(long, value_name = "URL")]
        from: String,
        /// The ledger to copy into, instead of the RELAY_LEDGER_URL the relay's configuration
        /// gives.
        #[arg(long, value_name = "URL")]
        to: Option<String>,
        /// The configuration file (instead of RELAY_CONFIG).
        #[arg(long)]
        config: Option<String>,
    },
}

/// Runs `relay ledger …`: 0 when done, 2 on an error.
pub(crate) fn run(command: &LedgerCommand) -> ExitCode {
    let LedgerCommand::Migrate { from, to, config } = command;
    let answer = crate::run::on_this_thread(migrate(from, to.as_deref(), config.as_deref()));
    crate::run::finish("ledger migrate", answer, 2, |()| ExitCode::SUCCESS)
}

fn table(flag: &str, url: &LedgerUrl) -> Result<String, CliError> {
    match url {
        LedgerUrl::DynamoDb { table } => Ok(table.clone()),
        other => Err(CliError::Invalid(format!(
            "{flag}: {other} is not a DynamoDB table; only the DynamoDB ledger's layout changed"
        ))),
    }
}

async fn migrate(from: &str, to: Option<&str>, config: Option<&str>) -> Result<(), CliError> {
    let earlier: LedgerUrl = from
        .parse()
        .map_err(|e| CliError::Invalid(format!("--from: {e}")))?;
    let earlier = table("--from", &earlier)?;
    let into = table("--to", &crate::trace::ledger_url(("--to", to), config)?)?;
    if earlier == into {
        return Err(CliError::Invalid(format!(
            "--from and --to both name {earlier}"
        )));
    }
    let copied =
        relay_core::ledger::copy_earlier_table(&earlier, &into, std::time::SystemTime::now())
            .await
            .map_err(|e| CliError::at(format!("{earlier} → {into}"), e))?;
    println!(
        "{earlier} → {into}: {} copied, {} already in {into} (kept), {} expired (not copied)",
        copied.copied, copied.kept, copied.expired
    );
    Ok(())
}
