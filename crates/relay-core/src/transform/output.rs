//! A program's value written as the message body: compact JSON, within a size and a depth.

use jaq_json::Val;

use super::{MAX_DEPTH, Unwritable};

/// `value` as compact JSON of at most `limit` bytes. Numbers that JSON cannot hold (NaN,
/// infinities) are written `null`, as jq writes them; byte strings as text, any invalid
/// UTF-8 replaced.
pub(super) fn write(value: &Val, limit: usize) -> Result<Vec<u8>, Unwritable> {
    let mut out = Vec::new();
    write_value(&mut out, value, 0, limit)?;
    Ok(out)
}

fn write_value(
    out: &mut Vec<u8>,
    value: &Val,
    depth: usize,
    limit: usize,
) -> Result<(), Unwritable> {
    if depth > MAX_DEPTH {
        return Err(Unwritable::TooDeep);
    }
    match value {
        Val::Null => out.extend_from_slice(b"null"),
        Val::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Val::Num(n) => {
            let text = n.to_string();
            match text.parse::<f64>() {
                Ok(f) if !f.is_finite() => out.extend_from_slice(b"null"),
                _ => out.extend_from_slice(text.as_bytes()),
            }
        }
        Val::TStr(s) | Val::BStr(s) => string(out, s, limit)?,
        Val::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item, depth + 1, limit)?;
            }
            out.push(b']');
        }
        Val::Obj(entries) => {
            out.push(b'{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match key {
                    Val::TStr(k) | Val::BStr(k) => string(out, k, limit)?,
                    other => return Err(Unwritable::KeyNotString(other.to_string())),
                }
                out.push(b':');
                write_value(out, item, depth + 1, limit)?;
            }
            out.push(b'}');
        }
    }
    match out.len() > limit {
        true => Err(Unwritable::TooLarge { limit }),
        false => Ok(()),
    }
}

/// A string, quoted and escaped; refused before it is copied when it cannot fit.
fn string(out: &mut Vec<u8>, bytes: &[u8], limit: usize) -> Result<(), Unwritable> {
    if out.len() + bytes.len() > limit {
        return Err(Unwritable::TooLarge { limit });
    }
    let text = String::from_utf8_lossy(bytes);
    serde_json::to_writer(&mut *out, text.as_ref()).expect("a string is written to memory");
    Ok(())
}
