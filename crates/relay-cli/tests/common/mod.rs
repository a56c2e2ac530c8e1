//! What the `relay` command's tests share.

use std::process::Command;

/// The `relay` binary, with none of the `RELAY_*` variables of the environment the tests run in.
pub(crate) fn relay_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_relay"));
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("RELAY_")) {
        cmd.env_remove(name);
    }
    cmd
}
