//! A destination's transform (`transform = '<jq program>'`): compiled once by jaq, run over
//! each notification's document, yielding the message body as compact JSON.
//!
//! jaq bounds neither its time nor its stack, so the relay does: a program that defines a
//! filter able to call itself is refused when it compiles (`recursion`); a run stops at its
//! deadline, read as the interpreter steps (`budget`); it runs on a stack of its own, deep
//! enough for the values it can build before then (its own stack, with the timeout at most
//! `MAX_TIMEOUT`); and its value is written within a size (`output`). A run that fails
//! answers for its destination alone.

#[cfg(feature = "transform")]
mod budget;
#[cfg(feature = "transform")]
mod engine;
#[cfg(feature = "transform")]
mod output;
#[cfg(feature = "transform")]
mod recursion;

use std::time::Duration;

/// Longest time limit a run may be given (`RELAY_TRANSFORM_TIMEOUT_MS`), so that a run's
/// stack holds what it builds.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(1);

/// Deepest nesting a message body may have (as deep as the relay parses).
const MAX_DEPTH: usize = 128;

/// A compiled program.
pub struct Program {
    source: String,
    #[cfg(feature = "transform")]
    compiled: engine::Compiled,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Program").field(&self.source).finish()
    }
}

/// Two programs are the same when their text is.
impl PartialEq for Program {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Program {}

/// Why a program was refused, and where in its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ProgramError {
    /// One-based line of the fault.
    pub line: usize,
    /// One-based column (in characters).
    pub column: usize,
    /// What is wrong there.
    pub message: String,
}

impl ProgramError {
    /// The fault at `at`, a part of `source` (or its end when `at` is empty and outside it).
    #[cfg_attr(not(feature = "transform"), allow(dead_code))]
    fn at(source: &str, at: &str, message: String) -> Self {
        let offset = (at.as_ptr() as usize)
            .checked_sub(source.as_ptr() as usize)
            .filter(|&o| o <= source.len())
            .unwrap_or(source.len());
        let before = &source[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Self {
            line,
            column,
            message,
        }
    }
}

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest a run may take.
    pub timeout: Duration,
    /// Largest body it may yield, in bytes.
    pub max_output: usize,
}

/// Why a value cannot be a message body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unwritable {
    /// Larger than the limit.
    #[error("the value is larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Nested deeper than JSON parsers take.
    #[error("the value is nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// An object key that is not a string (jaq allows them; JSON does not).
    #[error("an object key is not a string: {0}")]
    KeyNotString(String),
}

/// Why a run yielded no message body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The program raised an error.
    #[error("the program failed: {0}")]
    Failed(String),
    /// It was still running at the time limit.
    #[error("the program did not finish within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// It yielded nothing.
    #[error("the program yielded no value")]
    NoValue,
    /// It yielded more than one value.
    #[error("the program yielded more than one value")]
    SeveralValues,
    /// Its value cannot be a message body.
    #[error(transparent)]
    Unwritable(#[from] Unwritable),
}

impl RunError {
    /// A short stable name for logs and answers.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Failed(_) => "program_error",
            Self::TimedOut(_) => "timed_out",
            Self::NoValue => "no_value",
            Self::SeveralValues => "several_values",
            Self::Unwritable(Unwritable::TooLarge { .. }) => "too_large",
            Self::Unwritable(_) => "not_json",
        }
    }
}

impl Program {
    /// Compiles `source`: refused with its position when it does not parse, calls a filter
    /// that does not exist (or that transforms may not call), imports modules, or defines a
    /// filter that can call itself. A build without the cargo feature `transform` refuses
    /// every program.
    pub fn compile(source: &str) -> Result<Self, ProgramError> {
        #[cfg(feature = "transform")]
        return Ok(Self {
            source: source.to_owned(),
            compiled: engine::Compiled::compile(source)?,
        });
        #[cfg(not(feature = "transform"))]
        Err(ProgramError {
            line: 1,
            column: 1,
            message: format!(
                "transforms need the cargo feature `transform`, which this build leaves out ({} bytes of program refused)",
                source.len()
            ),
        })
    }

    /// The program as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Runs the program over `document`: its one value, written as compact JSON.
    pub fn run(&self, document: &serde_json::Value, limits: Limits) -> Result<Vec<u8>, RunError> {
        #[cfg(feature = "transform")]
        return self.compiled.run(document, limits);
        #[cfg(not(feature = "transform"))]
        {
            let _ = (document, limits);
            Err(RunError::Failed("this build has no transforms".into()))
        }
    }
}

#[cfg(all(test, feature = "transform"))]
mod tests {
    use std::time::Instant;

    use super::*;

    const LIMITS: Limits = Limits {
        timeout: Duration::from_millis(100),
        max_output: 1 << 20,
    };

    fn document() -> serde_json::Value {
        serde_json::json!({
            "subscription_id": "s",
            "event_type": "CREATE",
            "match": {"bundle_uuid": "u", "bundle_version": "v"},
        })
    }

    fn run(source: &str) -> Result<String, RunError> {
        let program = Program::compile(source).unwrap();
        program
            .run(&document(), LIMITS)
            .map(|body| String::from_utf8(body).unwrap())
    }

    #[test]
    fn a_notification_is_reshaped_into_compact_json() {
        let reshape =
            "{bundle: .match.bundle_uuid, version: .match.bundle_version, event: .event_type}";
        assert_eq!(
            run(reshape).unwrap(),
            r#"{"bundle":"u","version":"v","event":"CREATE"}"#
        );
        assert_eq!(
            run(".match.bundle_uuid |= ascii_upcase | .match").unwrap(),
            r#"{"bundle_uuid":"U","bundle_version":"v"}"#
        );
        // Numbers JSON cannot hold are null, as jq writes them; others as written.
        assert_eq!(
            run("[nan, infinite, 1.5, 1.000, 100000000000000000000000]").unwrap(),
            "[null,null,1.5,1.000,100000000000000000000000]"
        );
        assert_eq!(
            run("[[range(0; 10; 3)], [range(5; 0; -2)], [range(3; 3; 0)]]").unwrap(),
            "[[0,3,6,9],[5,3,1],[]]"
        );
    }

    #[test]
    fn programs_that_cannot_compile_are_refused_with_their_position() {
        let e = Program::compile(".match |\n  {bundle: }").unwrap_err();
        assert_eq!((e.line, e.column), (2, 12), "{e}");
        let e = Program::compile(".a | nosuch(1)").unwrap_err();
        assert_eq!((e.line, e.column), (1, 6), "{e}");
        assert!(e.message.contains("nosuch is not defined"), "{e}");
        // Leaving the process, reading its environment or writing to its error stream.
        for withheld in [
            "halt",
            "halt_error",
            "env",
            "$ENV",
            "debug",
            "stderr",
            "input",
        ] {
            let e = Program::compile(withheld).unwrap_err();
            assert!(e.message.contains("is not defined"), "{withheld}: {e}");
        }
        let e = Program::compile(r#"import "x" as x; ."#).unwrap_err();
        assert!(e.message.contains("modules cannot be loaded"), "{e}");
    }

    #[test]
    fn definitions_that_can_call_themselves_are_refused() {
        for (source, name, column) in [
            ("def f: 1 + f; f", "f", 5),
            ("def even: odd; def odd: even; 1", "even", 5),
            (r#""\(def g(x): x | g(x); 1)""#, "g", 8),
            ("[.[] | def walker: .[]? | walker; walker]", "walker", 12),
        ] {
            let e = Program::compile(source).unwrap_err();
            assert_eq!(e.column, column, "{source}: {e}");
            assert!(
                e.message.starts_with(&format!("{name} can call itself")),
                "{e}"
            );
        }
        // Definitions that call others, and the library's own recursion, are fine.
        assert!(Program::compile("def f(x): x + 1; def g: f(2); g").is_ok());
        assert_eq!(run("0 | [limit(3; recurse(. + 1))]").unwrap(), "[0,1,2]");
    }

    #[test]
    fn each_run_yields_exactly_one_value_within_its_limits() {
        assert_eq!(run("1, 2"), Err(RunError::SeveralValues));
        assert_eq!(run("empty"), Err(RunError::NoValue));
        assert_eq!(
            run("select(.event_type == \"DELETE\")"),
            Err(RunError::NoValue)
        );
        assert!(
            matches!(run("error(\"no bundle\")"), Err(RunError::Failed(m)) if m.contains("no bundle"))
        );
        let large = run("\"x\" * 2000000").unwrap_err();
        assert_eq!(large.code(), "too_large");
        let deep = run("reduce range(200) as $x (null; [.])").unwrap_err();
        assert_eq!(deep, RunError::Unwritable(Unwritable::TooDeep));
        assert_eq!(run("{(1): 2}").unwrap_err().code(), "not_json");
    }

    #[test]
    fn a_run_without_end_is_stopped_at_its_time_limit() {
        for endless in [
            "last(range(1e18))",
            "[range(infinite)]",
            "last(repeat(1))",
            "[range(1000)] as $a | last($a[] as $x | $a[] as $y | $a[] | $x)",
            "reduce range(1e9) as $x (null; [.])",
            "try last(range(1e18)) catch last(range(1e18))",
            "def f: f; f",
        ] {
            let started = Instant::now();
            let limits = Limits {
                timeout: Duration::from_millis(20),
                ..LIMITS
            };
            let result = Program::compile(endless)
                .map_err(|e| e.to_string())
                .map(|p| p.run(&document(), limits));
            if endless.starts_with("def") {
                assert!(result.is_err(), "{endless}: refused when compiled");
                continue;
            }
            assert_eq!(
                result,
                Ok(Err(RunError::TimedOut(limits.timeout))),
                "{endless}"
            );
            assert!(started.elapsed() < Duration::from_secs(5), "{endless}");
        }
    }
}
