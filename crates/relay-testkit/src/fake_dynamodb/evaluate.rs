//! What the parsed expressions do to an item: a condition holds or not, an update gives the
//! new item. Attribute values are compared as DynamoDB compares them: numbers by value, types
//! never equal to one another, maps and lists deeply.

use serde_json::Value;

use super::expression::{Cmp, Condition, Invalid, Item, Operand, Path, Step, Update, invalid};

/// The value at `path` in `item`, if any.
pub(crate) fn resolve<'a>(item: &'a Item, path: &Path) -> Option<&'a Value> {
    let mut steps = path.0.iter();
    let Some(Step::Field(first)) = steps.next() else {
        return None;
    };
    let mut value = item.get(first)?;
    for step in steps {
        value = match step {
            Step::Field(name) => value.get("M")?.get(name)?,
            Step::Index(i) => value.get("L")?.get(*i)?,
        };
    }
    Some(value)
}

fn evaluate(item: &Item, operand: &Operand) -> Result<Option<Value>, Invalid> {
    Ok(match operand {
        Operand::Path(path) => resolve(item, path).cloned(),
        Operand::Value(value) => Some(value.clone()),
        Operand::IfNotExists(path, default) => match resolve(item, path) {
            Some(value) => Some(value.clone()),
            None => evaluate(item, default)?,
        },
        Operand::ListAppend(a, b) => {
            let (a, b) = (evaluate(item, a)?, evaluate(item, b)?);
            match (
                a.as_ref().and_then(|a| a.get("L")),
                b.as_ref().and_then(|b| b.get("L")),
            ) {
                (Some(Value::Array(a)), Some(Value::Array(b))) => {
                    let joined: Vec<Value> = a.iter().chain(b).cloned().collect();
                    Some(serde_json::json!({ "L": joined }))
                }
                _ => {
                    return invalid(
                        "An operand in the update expression has an incorrect data type",
                    );
                }
            }
        }
    })
}

/// A number attribute's text, compared exactly where both are integers.
fn compare_numbers(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(a), Ok(b)) => Some(a.cmp(&b)),
        _ => a.parse::<f64>().ok()?.partial_cmp(&b.parse::<f64>().ok()?),
    }
}

fn scalar(value: &Value) -> Option<(&str, &Value)> {
    let object = value.as_object()?;
    match object.len() {
        1 => object.iter().next().map(|(t, v)| (t.as_str(), v)),
        _ => None,
    }
}

/// Equality of two attribute values: same type, numbers by value, maps and lists deeply.
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    match (scalar(a), scalar(b)) {
        (Some(("N", Value::String(x))), Some(("N", Value::String(y)))) => {
            compare_numbers(x, y) == Some(std::cmp::Ordering::Equal)
        }
        (Some(("M", Value::Object(x))), Some(("M", Value::Object(y)))) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        (Some(("L", Value::Array(x))), Some(("L", Value::Array(y)))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| equal(v, w))
        }
        _ => a == b,
    }
}

fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (scalar(a)?, scalar(b)?) {
        (("N", Value::String(x)), ("N", Value::String(y))) => compare_numbers(x, y),
        (("S", Value::String(x)), ("S", Value::String(y)))
        | (("B", Value::String(x)), ("B", Value::String(y))) => {
            Some(x.as_bytes().cmp(y.as_bytes()))
        }
        _ => None,
    }
}

/// Whether `condition` holds on `item` (empty when there is no item). A comparison with an
/// absent side is false, except `<>`, which is true.
pub(crate) fn holds(item: &Item, condition: &Condition) -> Result<bool, Invalid> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    Ok(match condition {
        Condition::Or(a, b) => holds(item, a)? || holds(item, b)?,
        Condition::And(a, b) => holds(item, a)? && holds(item, b)?,
        Condition::Not(a) => !holds(item, a)?,
        Condition::Exists(path) => resolve(item, path).is_some(),
        Condition::NotExists(path) => resolve(item, path).is_none(),
        Condition::BeginsWith(a, b) => match (evaluate(item, a)?, evaluate(item, b)?) {
            (Some(a), Some(b)) => match (a.get("S"), b.get("S")) {
                (Some(Value::String(a)), Some(Value::String(b))) => a.starts_with(b.as_str()),
                _ => false,
            },
            _ => false,
        },
        Condition::Compare(a, cmp, b) => {
            let (a, b) = (evaluate(item, a)?, evaluate(item, b)?);
            let (Some(a), Some(b)) = (a, b) else {
                return Ok(*cmp == Cmp::Ne);
            };
            match cmp {
                Cmp::Eq => equal(&a, &b),
                Cmp::Ne => !equal(&a, &b),
                Cmp::Lt => order(&a, &b) == Some(Less),
                Cmp::Le => matches!(order(&a, &b), Some(Less | Equal)),
                Cmp::Gt => order(&a, &b) == Some(Greater),
                Cmp::Ge => matches!(order(&a, &b), Some(Greater | Equal)),
            }
        }
    })
}

pub(crate) const INVALID_PATH: &str =
    "The document path provided in the update expression is invalid for update";

fn set_at(item: &mut Item, path: &Path, value: Value) -> Result<(), Invalid> {
    let (last, parents) = path.0.split_last().expect("a path has a first step");
    let mut steps = parents.iter();
    let mut target: &mut Value = match (steps.next(), last) {
        (None, Step::Field(name)) => {
            item.insert(name.clone(), value);
            return Ok(());
        }
        (Some(Step::Field(first)), _) => item.get_mut(first).ok_or(Invalid(INVALID_PATH.into()))?,
        _ => return invalid(INVALID_PATH),
    };
    for step in steps {
        target = match step {
            Step::Field(name) => target.get_mut("M").and_then(|m| m.get_mut(name)),
            Step::Index(i) => target.get_mut("L").and_then(|l| l.get_mut(*i)),
        }
        .ok_or(Invalid(INVALID_PATH.into()))?;
    }
    match (last, target) {
        (Step::Field(name), Value::Object(o)) if o.contains_key("M") => {
            if let Some(Value::Object(map)) = o.get_mut("M") {
                map.insert(name.clone(), value);
            }
        }
        (Step::Index(i), Value::Object(o)) if o.contains_key("L") => {
            if let Some(Value::Array(list)) = o.get_mut("L") {
                // Past the end, DynamoDB appends.
                match list.get_mut(*i) {
                    Some(slot) => *slot = value,
                    None => list.push(value),
                }
            }
        }
        _ => return invalid(INVALID_PATH),
    }
    Ok(())
}

fn remove_at(item: &mut Item, path: &Path) {
    let (last, parents) = path.0.split_last().expect("a path has a first step");
    if parents.is_empty() {
        if let Step::Field(name) = last {
            item.remove(name);
        }
        return;
    }
    let Some(Step::Field(first)) = parents.first() else {
        return;
    };
    let Some(mut target) = item.get_mut(first) else {
        return;
    };
    for step in &parents[1..] {
        let next = match step {
            Step::Field(name) => target.get_mut("M").and_then(|m| m.get_mut(name)),
            Step::Index(i) => target.get_mut("L").and_then(|l| l.get_mut(*i)),
        };
        let Some(next) = next else { return };
        target = next;
    }
    match last {
        Step::Field(name) => {
            if let Some(Value::Object(map)) = target.get_mut("M") {
                map.remove(name);
            }
        }
        Step::Index(i) => {
            if let Some(Value::Array(list)) = target.get_mut("L")
                && *i < list.len()
            {
                list.remove(*i);
            }
        }
    }
}

/// `update` applied to `old` (empty when there is no item): every operand is read from the
/// old item, as DynamoDB does, then the SETs and REMOVEs are written.
pub(crate) fn apply(old: &Item, update: &Update) -> Result<Item, Invalid> {
    let values = (update.set.iter())
        .map(|(path, operand)| match evaluate(old, operand)? {
            Some(value) => Ok((path, value)),
            None => invalid(
                "The provided expression refers to an attribute that does not exist in the item",
            ),
        })
        .collect::<Result<Vec<_>, Invalid>>()?;
    let mut new = old.clone();
    for (path, value) in values {
        set_at(&mut new, path, value)?;
    }
    for path in &update.remove {
        remove_at(&mut new, path);
    }
    Ok(new)
}

/// Two paths of one update may not overlap (one a prefix of the other), as in DynamoDB.
pub(crate) fn check_overlaps(update: &Update) -> Result<(), Invalid> {
    let paths: Vec<&Path> = (update.set.iter().map(|(p, _)| p))
        .chain(&update.remove)
        .collect();
    for (i, a) in paths.iter().enumerate() {
        for b in &paths[i + 1..] {
            let n = a.0.len().min(b.0.len());
            if a.0[..n] == b.0[..n] {
                return invalid(format!(
                    "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: {a:?}, path two: {b:?}"
                ));
            }
        }
    }
    Ok(())
}
