//! The time limit of a run: the interpreter asks for its table of definitions before it
//! evaluates each term, and that is where the clock is read.

use std::cell::Cell;
use std::time::Instant;

use jaq_core::data::{DataT, HasLut};
use jaq_core::load::parse::Def;
use jaq_core::native::{Fun, v};
use jaq_core::{Cv, Exn, Lut, Native, RunPtr, ValX, ValXs};
use jaq_json::Val;

/// How often the clock is read, in terms evaluated.
const STEPS_PER_READING: u32 = 256;

/// The data kind the relay's programs run with: JSON values, and a [`Clock`] beside the
/// definitions.
pub(super) struct Timed;

impl DataT for Timed {
    type V<'a> = Val;
    type Data<'a> = Clock<'a>;
}

/// What a run unwinds with when its time is up.
pub(super) struct OutOfTime;

/// One run's deadline, and the steps taken since the clock was last read.
pub(super) struct Budget {
    deadline: Instant,
    steps: Cell<u32>,
}

impl Budget {
    pub(super) fn until(deadline: Instant) -> Self {
        Self {
            deadline,
            steps: Cell::new(0),
        }
    }

    /// Counts one step; every so often reads the clock, and once the deadline has passed
    /// unwinds out of the interpreter (caught where the run began).
    fn tick(&self) {
        let steps = self.steps.get().wrapping_add(1);
        self.steps.set(steps);
        if steps.is_multiple_of(STEPS_PER_READING) && Instant::now() >= self.deadline {
            std::panic::resume_unwind(Box::new(OutOfTime));
        }
    }
}

/// The definitions and the budget, handed to every term the interpreter evaluates.
#[derive(Clone)]
pub(super) struct Clock<'a> {
    pub(super) lut: &'a Lut<Timed>,
    pub(super) budget: &'a Budget,
}

impl<'a> HasLut<'a, Timed> for Clock<'a> {
    fn lut(&self) -> &'a Lut<Timed> {
        self.budget.tick();
        self.lut
    }
}

/// Filters a transform may not call: leaving the process, reading its environment, writing
/// to its standard error; the natives and the definitions built on them.
const WITHHELD: [&str; 8] = [
    "halt",
    "halt_error",
    "env",
    "debug",
    "debug_empty",
    "stderr",
    "stderr_empty",
    "input",
];

/// The definitions programs may call: jaq's standard library, less those [`WITHHELD`].
pub(super) fn definitions() -> impl Iterator<Item = Def<&'static str>> {
    jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .filter(|def| !WITHHELD.contains(&def.name))
}

/// Data kinds whose data carries a run's [`Budget`].
pub(super) trait Budgeted: for<'a> DataT<V<'a> = Val> {
    /// The budget of the run `data` belongs to.
    fn budget<'a>(data: &Self::Data<'a>) -> &'a Budget;
}

impl Budgeted for Timed {
    fn budget<'a>(data: &Self::Data<'a>) -> &'a Budget {
        data.budget
    }
}

/// The native filters programs may call: jaq's own, less those [`WITHHELD`], with `range`
/// counting its steps, so that a range without end stops at the deadline.
pub(super) fn natives<D: Budgeted>() -> impl Iterator<Item = Fun<D>> {
    let std = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| !WITHHELD.contains(name) && *name != "range");
    let run: RunPtr<D> = range::<D>;
    std.chain([("range", v(3), Native::<D>::new(run))])
}

/// `range($from; $upto; $by)`: from `$from` by `$by` while short of `$upto` (below it
/// counting up, above it counting down, any other value with a step of zero).
fn range<'a, D: Budgeted>(mut cv: Cv<'a, D>) -> ValXs<'a, D::V<'a>> {
    let by = cv.0.pop_var();
    let upto = cv.0.pop_var();
    let mut next: Option<ValX<'a, D::V<'a>>> = Some(Ok(cv.0.pop_var()));
    let budget = D::budget(cv.0.data());
    let direction = by.partial_cmp(&D::V::from(0isize));
    Box::new(std::iter::from_fn(move || {
        budget.tick();
        let current = match next.take()? {
            Ok(current) => current,
            Err(e) => return Some(Err(e)),
        };
        let short = match direction {
            Some(std::cmp::Ordering::Greater) => current < upto,
            Some(std::cmp::Ordering::Less) => current > upto,
            _ => current != upto,
        };
        if short {
            next = Some((current.clone() + by.clone()).map_err(Exn::from));
        }
        short.then_some(Ok(current))
    }))
}
