//! Templates for FIFO group and deduplication ids and Pub/Sub ordering keys:
//! `"{match.bundle_uuid}"`, `"dss-{subscription_id}"`, `"{$dedup_key}"`.

use serde_json::Value;

/// A compiled template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(Vec<String>),
    DedupKey,
    Source,
}

impl std::str::FromStr for Template {
    type Err = crate::text::InvalidValue;
    fn from_str(source: &str) -> Result<Self, Self::Err> {
        Self::parse(source).map_err(|e| e.0.into())
    }
}

crate::text::deserialize_from_text!(Template, "a template such as \"{match.bundle_uuid}\"");

impl serde::Serialize for Template {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

/// A template that does not parse, or a field a notification lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl Template {
    /// Parses `{dotted.field}`, `{$dedup_key}` and `{$source}` placeholders; `{{` and `}}` are
    /// literal braces.
    pub fn parse(source: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = source.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed || name.is_empty() || name.contains('{') {
                        return Err(TemplateError(format!(
                            "template {source:?}: empty or unclosed placeholder"
                        )));
                    }
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(match name.as_str() {
                        "$dedup_key" => Part::DedupKey,
                        "$source" => Part::Source,
                        n if n.starts_with('$') => {
                            return Err(TemplateError(format!(
                                "template {source:?}: unknown placeholder {{{n}}}"
                            )));
                        }
                        n => Part::Field(n.split('.').map(str::to_owned).collect()),
                    });
                }
                '}' => return Err(TemplateError(format!("template {source:?}: unmatched }}"))),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        if parts.is_empty() {
            return Err(TemplateError("a template cannot be empty".into()));
        }
        Ok(Self {
            source: source.to_owned(),
            parts,
        })
    }

    /// Renders against a notification; a field that is missing, or not a string or number,
    /// is an error.
    pub(crate) fn render(
        &self,
        document: &Value,
        dedup_key: &str,
        source: &str,
    ) -> Result<String, TemplateError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::DedupKey => out.push_str(dedup_key),
                Part::Source => out.push_str(source),
                Part::Field(path) => {
                    let value = path.iter().try_fold(document, |v, key| v.get(key));
                    match value {
                        Some(Value::String(s)) => out.push_str(s),
                        Some(n @ Value::Number(_)) => out.push_str(&n.to_string()),
                        _ => {
                            return Err(TemplateError(format!(
                                "template {:?}: the notification has no string or number at {}",
                                self.source,
                                path.join(".")
                            )));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_fields_and_the_dedup_key() {
        let doc = json!({"subscription_id": "s1", "match": {"bundle_uuid": "u1"}, "n": 3});
        let t = Template::parse("{match.bundle_uuid}/{subscription_id}-{n}-{$dedup_key}-{{x}}")
            .unwrap();
        assert_eq!(t.render(&doc, "k", "dss").unwrap(), "u1/s1-3-k-{x}");
        let missing = Template::parse("{event_type}").unwrap();
        assert!(missing.render(&doc, "k", "dss").is_err());
        for bad in [
            "",
            "{",
            "{}",
            "}",
            "{$nope}",
            "{a{b}",
            "{subscription_id",
            "x-{a",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad:?}");
        }
    }
}
