//! `relay ledger migrate` and `relay trace --key` on a DynamoDB ledger: what each refuses
//! before any call, with exit code 2 and what to do.

mod common;

use std::process::Command;

fn relay_cmd() -> Command {
    let mut cmd = common::relay_cmd();
    // No AWS credentials or metadata service is needed for what these refuse.
    cmd.env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1");
    cmd
}

/// Runs `args`: the exit code and standard error.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = relay_cmd().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn migrate_copies_only_between_two_dynamodb_tables() {
    let (code, stderr) = refused(&[
        "ledger",
        "migrate",
        "--from",
        "target/ledger.db",
        "--to",
        "dynamodb://new-ledger",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--from") && stderr.contains("not a DynamoDB table"),
        "{stderr}"
    );

    let (code, stderr) = refused(&[
        "ledger",
        "migrate",
        "--from",
        "dynamodb://dss-relay-ledger",
        "--to",
        "dynamodb://dss-relay-ledger",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("both name dss-relay-ledger"), "{stderr}");

    let (code, stderr) = refused(&["ledger", "migrate", "--from", "dynamodb://old"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no ledger is configured") && stderr.contains("--to URL"),
        "{stderr}"
    );
}

#[test]
fn a_key_alone_is_refused_on_a_dynamodb_ledger_with_what_to_pass() {
    let key = "d649e099e93e44b9b1682b362695caccd4e7ad961063788cb05690dec2ac6f38";
    let (code, stderr) = refused(&[
        "trace",
        "--key",
        key,
        "--ledger",
        "dynamodb://dss-relay-ledger",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("name the bundle"), "{stderr}");
}
