//! What the `relay` command's tests share.
// Each test file is its own crate and uses some of these.
#![allow(dead_code)]

use std::process::{Command, Output};

/// The `relay` binary, with none of the `RELAY_*` variables of the environment the tests run in.
pub(crate) fn relay_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_relay"));
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("RELAY_")) {
        cmd.env_remove(name);
    }
    cmd
}

/// Runs `cmd` to its end off the runtime's threads (a relay the test serves may be what it
/// talks to).
pub(crate) async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Bytes a command wrote, as text.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `cmd` and asserts it succeeded: what it wrote to standard output and standard error.
pub(crate) async fn succeeded(cmd: Command) -> (String, String) {
    let out = output(cmd).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

/// Runs `cmd` and asserts it exited with `code`, saying `says` on standard error.
pub(crate) async fn assert_fails(cmd: Command, code: i32, says: &str) {
    let out = output(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
}
