//! Programs that could recurse without bound are refused before they run: a definition that
//! calls itself, directly or through other definitions of the program, would grow the
//! interpreter's stack with every call, and no time limit can stop a stack from overflowing.
//! The standard library's recursive filters (`recurse`, `repeat`, `while`, `until`, ...) are
//! the interpreter's, which runs them in constant stack.

use std::collections::{BTreeMap, BTreeSet};

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::path::Part;

/// A filter as the program names it: its name and how many arguments it takes.
type Signature<'s> = (&'s str, usize);

/// The first definition of `term` that can reach itself, if any.
pub(super) fn recursive_definition<'s>(term: &Term<&'s str>) -> Option<&'s str> {
    let mut calls = BTreeMap::new();
    collect(term, None, &mut calls);
    calls
        .keys()
        .find(|signature| reaches(&calls, **signature))
        .map(|(name, _)| *name)
}

/// True when `start`'s body leads back to `start` through the program's own definitions.
fn reaches(calls: &BTreeMap<Signature<'_>, BTreeSet<Signature<'_>>>, start: Signature<'_>) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<_> = calls[&start].iter().copied().collect();
    while let Some(next) = todo.pop() {
        if next == start {
            return true;
        }
        if seen.insert(next) {
            todo.extend(calls.get(&next).into_iter().flatten().copied());
        }
    }
    false
}

/// Records every call `term` makes under the definition `within`, and every definition it
/// makes, with the calls of its body.
fn collect<'s>(
    term: &Term<&'s str>,
    within: Option<Signature<'s>>,
    calls: &mut BTreeMap<Signature<'s>, BTreeSet<Signature<'s>>>,
) {
    macro_rules! visit {
        ($t:expr) => {
            collect($t, within, calls)
        };
    }
    match term {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => {}
        Term::Str(_, parts) => parts.iter().for_each(|part| {
            if let StrPart::Term(t) = part {
                visit!(t)
            }
        }),
        Term::Arr(inner) => inner.iter().for_each(|t| visit!(t)),
        Term::Obj(entries) => entries.iter().for_each(|(k, v)| {
            visit!(k);
            v.iter().for_each(|v| visit!(v));
        }),
        Term::Neg(t) | Term::Label(_, t) => visit!(t),
        Term::BinOp(l, op, r) => {
            if let BinaryOp::Pipe(Some(pattern)) = op {
                patterns(pattern, within, calls);
            }
            visit!(l);
            visit!(r);
        }
        Term::Fold(_, xs, pattern, args) => {
            visit!(xs);
            patterns(pattern, within, calls);
            args.iter().for_each(|t| visit!(t));
        }
        Term::TryCatch(t, catch) => {
            visit!(t);
            catch.iter().for_each(|t| visit!(t));
        }
        Term::IfThenElse(branches, otherwise) => {
            branches.iter().for_each(|(c, t)| {
                visit!(c);
                visit!(t);
            });
            otherwise.iter().for_each(|t| visit!(t));
        }
        Term::Def(defs, rest) => {
            defs.iter().for_each(|def| definition(def, calls));
            visit!(rest);
        }
        Term::Call(name, args) => {
            if let Some(within) = within {
                calls.entry(within).or_default().insert((*name, args.len()));
            }
            args.iter().for_each(|t| visit!(t));
        }
        Term::Path(t, path) => {
            visit!(t);
            for (part, _) in &path.0 {
                match part {
                    Part::Index(i) => visit!(i),
                    Part::Range(from, upto) => from.iter().chain(upto).for_each(|t| visit!(t)),
                }
            }
        }
    }
}

/// Records a definition and the calls of its body.
fn definition<'s>(
    def: &Def<&'s str>,
    calls: &mut BTreeMap<Signature<'s>, BTreeSet<Signature<'s>>>,
) {
    let signature = (def.name, def.args.len());
    calls.entry(signature).or_default();
    collect(&def.body, Some(signature), calls);
}

/// Visits the terms inside a destructuring pattern (`{(f): $x}`).
fn patterns<'s>(
    pattern: &Pattern<&'s str>,
    within: Option<Signature<'s>>,
    calls: &mut BTreeMap<Signature<'s>, BTreeSet<Signature<'s>>>,
) {
    match pattern {
        Pattern::Var(_) => {}
        Pattern::Arr(items) => items.iter().for_each(|p| patterns(p, within, calls)),
        Pattern::Obj(entries) => entries.iter().for_each(|(key, p)| {
            collect(key, within, calls);
            patterns(p, within, calls);
        }),
    }
}
