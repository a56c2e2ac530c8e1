//! The workspace's binaries as processes: where a test finds them, a free loopback port, and
//! [`RelayProcess`], a relay server started on a port and waited for until it listens.

use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to listen, or to exit once asked to.
const PATIENCE: Duration = Duration::from_secs(20);

/// A binary of the workspace built next to the running test (`target/<profile>/<name>`): the
/// relay-gcf server, the `relay` command. `cargo build --workspace` builds them.
pub fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: cargo build --workspace",
        path.display()
    );
    path
}

/// A loopback port nothing listens on (yet).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("an address").port()
}

/// Runs `command` (a relay binary with no HMAC key configured) and checks that it refuses to
/// start: exit code `code`, and the reason on standard error.
pub fn assert_refuses_without_a_key(command: &mut Command, code: i32) {
    let output = command
        .env_remove("RELAY_HMAC_SECRET")
        .env_remove("RELAY_HMAC_KEYS")
        .env_remove("RELAY_ALLOW_UNSIGNED")
        .env("RELAY_FILE_SINK", "-")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains("RELAY_HMAC_KEYS: no HMAC key is configured"),
        "{stderr}"
    );
}

/// A relay server (relay-gcf) running as a process of its own: started on the `RELAY_LISTEN`
/// its command sets, or on a free loopback port when it sets none, and returned once that port
/// accepts a connection. Its standard output is discarded and its standard error kept in a file
/// ([`stderr`](Self::stderr)), which the panic shows when it exits early or never listens. It
/// is killed, and waited for, when dropped.
#[derive(Debug)]
pub struct RelayProcess {
    child: Child,
    addr: SocketAddr,
    stderr: tempfile::NamedTempFile,
}

impl RelayProcess {
    /// Starts `binary` with `envs` on top of the test's own environment.
    pub fn start<I, K, V>(binary: impl AsRef<Path>, envs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let mut command = Command::new(binary.as_ref());
        command.envs(envs);
        Self::spawn(command)
    }

    /// Starts `command`, as it is set up (arguments, a cleared or trimmed environment), with
    /// standard output discarded and standard error kept.
    pub fn spawn(mut command: Command) -> Self {
        let listen = command
            .get_envs()
            .find(|(name, _)| *name == "RELAY_LISTEN")
            .and_then(|(_, value)| value)
            .map(|value| {
                let value = value.to_string_lossy();
                value
                    .parse::<SocketAddr>()
                    .unwrap_or_else(|e| panic!("RELAY_LISTEN {value:?}: {e}"))
            });
        let addr = listen.unwrap_or_else(|| {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
            command.env("RELAY_LISTEN", addr.to_string());
            addr
        });
        let stderr = tempfile::NamedTempFile::new().expect("a temporary file");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.reopen().expect("the temporary file"));
        let program = command.get_program().to_string_lossy().into_owned();
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
        let mut process = Self {
            child,
            addr,
            stderr,
        };
        process.wait_until_listening(&program);
        process
    }

    fn wait_until_listening(&mut self, program: &str) {
        let deadline = Instant::now() + PATIENCE;
        while TcpStream::connect(self.addr()).is_err() {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                panic!(
                    "{program} exited ({status}) before listening:\n{}",
                    self.stderr()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{program} did not listen on {} within {PATIENCE:?}:\n{}",
                self.addr,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Where it listens, as a client connects (loopback in place of an unspecified address).
    pub fn addr(&self) -> SocketAddr {
        match self.addr.ip().is_unspecified() {
            true => SocketAddr::from((Ipv4Addr::LOCALHOST, self.addr.port())),
            false => self.addr,
        }
    }

    /// `http://` and [`addr`](Self::addr), without a path.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// A new connection to it.
    pub fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr()).unwrap_or_else(|e| panic!("{}: {e}", self.addr()))
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote to standard error so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.stderr.path()).unwrap_or_default()).into_owned()
    }

    /// Sends SIGTERM, as Cloud Run does before stopping an instance.
    pub fn terminate(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success(), "kill -TERM {}: {killed}", self.id());
    }

    /// Sends SIGKILL, as a crash or an instance stopped without warning would end it, and waits
    /// for it to exit.
    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().expect("the child's status")
    }

    /// Its exit status if it has exited, without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("the child's status")
    }

    /// Waits for it to exit, for at most `timeout`; panics, with what it logged, if it does not.
    pub fn exits_within(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {timeout:?}:\n{}",
                self.id(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "exited (exit status: 3) before listening:\nno key configured")]
    fn a_server_that_exits_before_listening_fails_with_what_it_logged() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo no key configured >&2; exit 3"]);
        RelayProcess::spawn(command);
    }

    #[test]
    fn the_listen_address_set_on_the_command_is_the_one_waited_for() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut command = Command::new("sleep");
        command.arg("30").env("RELAY_LISTEN", addr.to_string());
        let process = RelayProcess::spawn(command);
        assert_eq!(process.addr(), addr);
        assert_eq!(process.url(), format!("http://{addr}"));
    }
}
