//! The engine behind [`Program`](super::Program) (cargo feature `transform`): jaq's
//! compiler with the relay's library ([`budget`](super::budget)), and each run on this
//! thread's own stack under its deadline.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::Instant;

use corosensei::stack::DefaultStack;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars};
use jaq_json::Val;

use super::budget::{Budget, Clock, OutOfTime, Timed, definitions, natives};
use super::output::write;
use super::recursion::recursive_definition;
use super::{Limits, ProgramError, RunError};

/// Stack a run takes (reserved, touched only as deep as it goes): values nested as deep as a
/// program can build them before its deadline are dropped recursively, far deeper than a
/// request task's stack. A value nested a level per step for [`MAX_TIMEOUT`](super::MAX_TIMEOUT)
/// fits. Each thread keeps its stack between runs, so a run's pages are touched once, not at
/// every run; a run stopped at its deadline leaves its stack to be unmapped.
const STACK_BYTES: usize = 256 << 20;

thread_local! {
    /// This thread's stack for runs, between them.
    static STACK: RefCell<Option<DefaultStack>> = const { RefCell::new(None) };
}

/// A program compiled by jaq.
pub(super) struct Compiled {
    filter: jaq_core::Filter<Timed>,
}

impl Compiled {
    /// Compiles `source`.
    pub(super) fn compile(source: &str) -> Result<Self, ProgramError> {
        let arena = Arena::default();
        let file = File {
            code: source,
            path: (),
        };
        let modules = Loader::new(definitions())
            .load(&arena, file)
            .map_err(|errors| {
                let (_, error) = errors
                    .into_iter()
                    .next()
                    .expect("a failed load has an error");
                load_error(source, error)
            })?;
        let term = jaq_core::load::parse(source, |p| p.term());
        if let Some(name) = term.as_ref().and_then(recursive_definition) {
            return Err(ProgramError::at(
                source,
                name,
                format!(
                    "{name} can call itself; a transform may not define recursive filters (use recurse, while or until)"
                ),
            ));
        }
        let filter = Compiler::default()
            .with_funs(natives::<Timed>())
            .compile(modules)
            .map_err(|errors| {
                let (_, mut undefined) = errors
                    .into_iter()
                    .next()
                    .expect("a failed compile has an error");
                let (name, _) = undefined.remove(0);
                ProgramError::at(source, name, format!("{name} is not defined"))
            })?;
        Ok(Self { filter })
    }

    /// Runs the program over `document`: its one value, written as compact JSON.
    pub(super) fn run(
        &self,
        document: &serde_json::Value,
        limits: Limits,
    ) -> Result<Vec<u8>, RunError> {
        let deadline = Instant::now() + limits.timeout;
        let taken = STACK.with(|kept| kept.borrow_mut().take());
        let mut stack = match taken.map_or_else(|| DefaultStack::new(STACK_BYTES), Ok) {
            Ok(stack) => stack,
            Err(e) => return Err(RunError::Failed(format!("no stack to run on: {e}"))),
        };
        let outcome = corosensei::on_stack(&mut stack, || {
            catch_unwind(AssertUnwindSafe(|| {
                self.evaluate(document, deadline, limits.max_output)
            }))
        });
        match outcome {
            Ok(result) => {
                STACK.with(|kept| *kept.borrow_mut() = Some(stack));
                result
            }
            Err(payload) if payload.is::<OutOfTime>() => Err(RunError::TimedOut(limits.timeout)),
            Err(payload) => resume_unwind(payload),
        }
    }

    fn evaluate(
        &self,
        document: &serde_json::Value,
        deadline: Instant,
        max_output: usize,
    ) -> Result<Vec<u8>, RunError> {
        let input: Val = serde::Deserialize::deserialize(document)
            .map_err(|e| RunError::Failed(e.to_string()))?;
        let budget = Budget::until(deadline);
        let clock = Clock {
            lut: &self.filter.lut,
            budget: &budget,
        };
        let mut outputs = self
            .filter
            .id
            .run((Ctx::<Timed>::new(clock, Vars::new([])), input));
        let value = match outputs.next() {
            None => return Err(RunError::NoValue),
            Some(Err(e)) => {
                let error: jaq_core::ValR<Val> = jaq_core::unwrap_valr(Err(e));
                return Err(RunError::Failed(
                    error.map_or_else(|e| e.to_string(), |_| String::new()),
                ));
            }
            Some(Ok(value)) => value,
        };
        if outputs.next().is_some() {
            return Err(RunError::SeveralValues);
        }
        Ok(write(&value, max_output)?)
    }
}

/// A parse or lex failure, at the text it found.
fn load_error(source: &str, error: jaq_core::load::Error<&str>) -> ProgramError {
    use jaq_core::load::Error;
    match error {
        Error::Io(mut errors) => {
            let (path, message) = errors.remove(0);
            ProgramError::at(source, path, format!("modules cannot be loaded: {message}"))
        }
        Error::Lex(mut errors) => {
            let (expected, at) = errors.remove(0);
            ProgramError::at(source, at, format!("expected {}", expected.as_str()))
        }
        Error::Parse(mut errors) => {
            let (expected, at) = errors.remove(0);
            let found = if at.is_empty() {
                "the end".to_owned()
            } else {
                format!("{at:?}")
            };
            ProgramError::at(
                source,
                at,
                format!("expected {}, found {found}", expected.as_str()),
            )
        }
    }
}
