//! The exact values of one leaf (`["CREATE", 5, true, null]`, or an `anything-but` list), as
//! a set built once at start, so a list of 100,000 subscription ids costs one lookup per
//! value, not 100,000 comparisons.

use std::collections::HashSet;

use serde_json::Value;

/// Exact values: strings equal byte for byte, numbers numerically (`5` is `5.0`), booleans
/// and `null` as themselves.
#[derive(Debug, Clone, Default)]
pub(super) struct ExactSet {
    strings: HashSet<String>,
    /// The bits of each number as an `f64`, `-0.0` read as `0.0`.
    numbers: HashSet<u64>,
    /// Numbers without an `f64` reading, compared as written.
    other_numbers: Vec<Value>,
    booleans: [bool; 2],
    null: bool,
}

/// The key of a number: its `f64` bits, zero's sign dropped. `NaN` equals nothing.
fn number_key(value: &Value) -> Option<u64> {
    let x = value.as_f64().filter(|x| !x.is_nan())?;
    Some(if x == 0.0 {
        0.0f64.to_bits()
    } else {
        x.to_bits()
    })
}

impl ExactSet {
    /// The set of `values` (objects and arrays are never exact values and are left out).
    pub(super) fn new<'v>(values: impl IntoIterator<Item = &'v Value>) -> Self {
        let mut set = Self::default();
        for value in values {
            match value {
                Value::String(s) => {
                    set.strings.insert(s.clone());
                }
                Value::Number(_) => match number_key(value) {
                    Some(key) => {
                        set.numbers.insert(key);
                    }
                    None => set.other_numbers.push(value.clone()),
                },
                Value::Bool(b) => set.booleans[usize::from(*b)] = true,
                Value::Null => set.null = true,
                Value::Array(_) | Value::Object(_) => {}
            }
        }
        set
    }

    /// Whether `value` is one of the set's values.
    pub(super) fn contains(&self, value: &Value) -> bool {
        match value {
            Value::String(s) => self.strings.contains(s.as_str()),
            Value::Number(_) => {
                number_key(value).is_some_and(|key| self.numbers.contains(&key))
                    || self.other_numbers.contains(value)
            }
            Value::Bool(b) => self.booleans[usize::from(*b)],
            Value::Null => self.null,
            Value::Array(_) | Value::Object(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn holds_each_kind_of_value_as_the_list_did() {
        let list = json!(["CREATE", 5, 0.25, -0.0, true, null, 18446744073709551615u64]);
        let set = ExactSet::new(list.as_array().unwrap());
        for (value, expected) in [
            (json!("CREATE"), true),
            (json!("create"), false),
            (json!(5), true),
            (json!(5.0), true),
            (json!(6), false),
            (json!("5"), false),
            (json!(0), true),
            (json!(0.25), true),
            (json!(true), true),
            (json!(false), false),
            (json!(null), true),
            (json!(18446744073709551615u64), true),
            (json!(["CREATE"]), false),
            (json!({"CREATE": 1}), false),
        ] {
            assert_eq!(set.contains(&value), expected, "{value}");
        }
        assert!(!ExactSet::new(&[json!(false)]).contains(&json!(null)));
    }
}
