//! How a destination shapes each message: the relay attributes it sends ([`Attributes`], with
//! the attempt header), static attributes it adds, its FIFO ids or ordering key
//! ([`Template`]s), and the body: the payload byte for byte, unless the destination has a
//! transform ([`Program`]) or takes CloudEvents in structured mode.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod attributes;
mod cloudevents;
mod template;

pub use attributes::Attributes;
pub(crate) use attributes::notify_attempt;
pub use cloudevents::Format;
pub(crate) use cloudevents::Mode;
pub use template::{Template, TemplateError};

use super::Message;
use crate::notification::{Notification, Verified};
use crate::transform::{Limits, Program, RunError};

/// The attribute a transformed message carries (`true`), the lowest-priority of the relay's.
pub(crate) const TRANSFORMED: &str = "relay.transformed";

/// The keys every `[sinks.<name>]` table takes, whatever its type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// The relay attributes to send, by name (default: all, in priority order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Vec<String>>,
    /// Static attributes added to every message, after the relay's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_attributes: BTreeMap<String, String>,
    /// A jq program whose one value, as compact JSON, is the message body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
}

impl Selection {
    /// The field names above, as a table spells them.
    pub(crate) const KEYS: [&'static str; 3] = ["attributes", "extra_attributes", "transform"];
}

/// Why a destination's message could not be made for a notification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unshaped {
    /// A template reads a field the notification lacks.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The destination's transform yielded no body.
    #[error(transparent)]
    Transform(#[from] RunError),
}

/// A sink setting that cannot work; `field` names the key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ShapeError {
    /// The key at fault.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl ShapeError {
    pub(crate) fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

/// A destination's message shaping, checked once at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    attributes: Option<Vec<String>>,
    /// Built once, so that every message shares their text.
    extra_attributes: Attributes,
    max_attributes: Option<usize>,
    /// FIFO `MessageGroupId` (SQS, SNS).
    pub group_id: Option<Template>,
    /// FIFO `MessageDeduplicationId` (SQS, SNS).
    pub dedup_id: Option<Template>,
    /// Pub/Sub ordering key.
    pub ordering_key: Option<Template>,
    /// The group id is the default, `{subscription_id}`: another source's events, which have
    /// none, are grouped by their source's name instead.
    default_group: bool,
    /// How the destination carries a request's trace context as attributes, if it does.
    trace: Option<TraceAttributes>,
    /// How it sends CloudEvents, when its `format` is `cloudevents`.
    cloudevents: Option<Mode>,
    /// Its transform, compiled once and shared by every message.
    transform: Option<std::sync::Arc<Program>>,
}

/// A destination's attributes for a request's trace context, the last and lowest-priority of
/// its attributes (dropped first where a destination keeps ten).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceAttributes {
    /// The `traceparent`'s name: `googclient_traceparent` on Pub/Sub (what Google's clients
    /// read), `traceparent` on SNS.
    pub(crate) traceparent: &'static str,
    /// The `tracestate`'s name, where the destination takes it.
    pub(crate) tracestate: Option<&'static str>,
}

impl Shape {
    /// Checks a selection against the relay's attributes and the destination's attribute
    /// limit (`None`: no limit).
    pub fn new(selection: &Selection, max_attributes: Option<usize>) -> Result<Self, ShapeError> {
        let unknown = selection
            .attributes
            .iter()
            .flatten()
            .find(|n| !Attributes::names().any(|known| known == n.as_str()));
        if let Some(unknown) = unknown {
            return Err(ShapeError::new(
                "attributes",
                format!(
                    "unknown attribute {unknown:?}; the relay's are {:?}",
                    Attributes::names().collect::<Vec<_>>()
                ),
            ));
        }
        let reserved = selection
            .extra_attributes
            .keys()
            .find(|k| k.starts_with("dss.") || k.starts_with("relay.") || k.is_empty());
        if let Some(reserved) = reserved {
            return Err(ShapeError::new(
                "extra_attributes",
                format!("{reserved:?} is reserved (dss.* and relay.* are the relay's own)"),
            ));
        }
        let count = selection
            .attributes
            .as_ref()
            .map_or(Attributes::MOST, Vec::len)
            + selection.extra_attributes.len();
        if let Some(limit) = max_attributes.filter(|&limit| count > limit) {
            return Err(ShapeError::new(
                "extra_attributes",
                format!(
                    "{count} attributes in all; this destination takes at most {limit} (select fewer with attributes = [...])"
                ),
            ));
        }
        let mut extra_attributes = Attributes::default();
        for (name, value) in &selection.extra_attributes {
            extra_attributes.push(name, value);
        }
        let transform = selection
            .transform
            .as_deref()
            .map(|source| Program::compile(source).map(std::sync::Arc::new))
            .transpose()
            .map_err(|e| ShapeError::new("transform", e.to_string()))?;
        Ok(Self {
            attributes: selection.attributes.clone(),
            extra_attributes,
            max_attributes,
            transform,
            ..Self::default()
        })
    }

    /// The attribute names a DSS notification's message to this destination can carry, in
    /// order.
    pub(crate) fn sent_attributes(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Attributes::ORDER
            .iter()
            .copied()
            .filter(|name| {
                self.attributes
                    .as_ref()
                    .is_none_or(|keep| keep.iter().any(|k| k == name))
            })
            .chain(self.extra_attributes.iter().map(|(name, _)| name))
            .collect();
        names.truncate(self.max_attributes.unwrap_or(usize::MAX));
        names
    }

    /// The message as this destination sends it: its body (the transform's value, within
    /// `limits`), its attributes, and its templates filled from the notification. A
    /// notification that lacks a field a template reads fails here, before any sink is called.
    /// The payload and the attributes' text are shared with `base`, never copied; the
    /// attribute list itself is copied only when the shape changes it.
    pub fn apply(
        &self,
        base: &Message,
        notification: &Notification<Verified>,
        limits: Limits,
    ) -> Result<Message, Unshaped> {
        let mut message = base.clone();
        if let Some(program) = &self.transform {
            message.payload = program.run(notification.document(), limits)?.into();
        }
        if let Some(names) = &self.attributes {
            message
                .attributes
                .retain(|name| names.iter().any(|n| n == name));
        }
        // A DSS notification's source comes after the destination's own attributes: it is
        // beyond the nine the destination's limit was checked against, so it is the one dropped.
        match notification.is_dss() {
            true => message
                .attributes
                .insert_before("relay.source", &self.extra_attributes),
            false => message.attributes.append(&self.extra_attributes),
        }
        if let Some(mode) = self.cloudevents {
            let payload = message.payload.clone();
            let event = cloudevents::CloudEvent::of(notification, &payload, base.received_at);
            match mode {
                Mode::Binary => event.attributes(&mut message.attributes),
                Mode::Structured => message.payload = event.envelope(&payload),
            }
        }
        if self.transform.is_some() {
            message.attributes.push(TRANSFORMED, "true");
        }
        if let (Some(trace), Some(context)) = (self.trace, base.trace.as_deref()) {
            if let Some(traceparent) = context.traceparent() {
                message.attributes.push(trace.traceparent, &traceparent);
            }
            if let (Some(name), Some(state)) = (trace.tracestate, context.tracestate()) {
                message.attributes.push(name, state);
            }
        }
        if let Some(limit) = self.max_attributes {
            message.attributes.truncate(limit);
        }
        let (document, key) = (notification.document(), notification.dedup_key());
        let source = notification.source();
        let fill = |t: &Option<Template>| {
            t.as_ref()
                .map(|t| t.render(document, key, source))
                .transpose()
        };
        message.group_id = match self.default_group && !notification.is_dss() {
            true => Some(source.to_owned()),
            false => fill(&self.group_id)?,
        };
        message.dedup_id = fill(&self.dedup_id)?;
        message.ordering_key = fill(&self.ordering_key)?;
        Ok(message)
    }

    /// True when the destination's body is its transform's.
    pub(crate) fn transforms(&self) -> bool {
        self.transform.is_some()
    }

    /// This shape, carrying a request's trace context as `trace` says.
    pub(crate) fn with_trace(self, trace: TraceAttributes) -> Self {
        Self {
            trace: Some(trace),
            ..self
        }
    }

    /// This shape, sending CloudEvents in `mode` when `format` asks for them.
    pub(crate) fn with_format(self, format: Format, mode: Mode) -> Self {
        Self {
            cloudevents: (format == Format::Cloudevents).then_some(mode),
            ..self
        }
    }

    /// Puts the attribute `name` first on `message`, within the destination's attribute
    /// limit (the lowest-priority attribute makes room): a mark that must not be dropped.
    pub fn mark(&self, message: &mut Message, name: &str, value: &str) {
        message.attributes.put_first(name, value);
        if let Some(limit) = self.max_attributes {
            message.attributes.truncate(limit);
        }
    }

    /// What `relay check` says about the shaping, after the destination itself.
    pub fn describe(&self) -> String {
        let mut text = String::new();
        if let Some(names) = &self.attributes {
            text.push_str(&format!("; attributes {}", names.join(", ")));
        }
        for (k, v) in self.extra_attributes.iter() {
            text.push_str(&format!("; {k}={v}"));
        }
        for (label, template) in [
            ("group id", &self.group_id),
            ("dedup id", &self.dedup_id),
            ("ordering key", &self.ordering_key),
        ] {
            if let Some(t) = template {
                text.push_str(&format!("; {label} {}", t.source()));
            }
        }
        if let Some(program) = &self.transform {
            text.push_str(&format!("; transform {}", program.source()));
        }
        match self.cloudevents {
            Some(Mode::Binary) => text.push_str("; CloudEvents, binary mode"),
            Some(Mode::Structured) => text.push_str("; CloudEvents, structured mode"),
            None => {}
        }
        text
    }
}

/// FIFO group and deduplication ids for a queue or topic: the configured templates, else
/// `{subscription_id}` groups (another source's events: their source's name) and the stable
/// dedup key, as the DSS's own queues had them. A standard queue or topic takes neither.
pub(crate) fn fifo_ids(
    shape: Shape,
    fifo: bool,
    group_id: Option<&Template>,
    dedup_id: Option<&Template>,
) -> Result<Shape, ShapeError> {
    if !fifo {
        return match (group_id, dedup_id) {
            (None, None) => Ok(shape),
            (Some(_), _) => Err(ShapeError::new("message_group_id", NOT_FIFO)),
            (None, Some(_)) => Err(ShapeError::new("message_deduplication_id", NOT_FIFO)),
        };
    }
    let default = |source: &str| Template::parse(source).expect("a valid template");
    Ok(Shape {
        group_id: Some(
            group_id
                .cloned()
                .unwrap_or_else(|| default("{subscription_id}")),
        ),
        dedup_id: Some(dedup_id.cloned().unwrap_or_else(|| default("{$dedup_key}"))),
        default_group: group_id.is_none(),
        ..shape
    })
}

const NOT_FIFO: &str =
    "only FIFO queues and topics (names ending in .fifo) take group and deduplication ids";

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        timeout: std::time::Duration::from_millis(100),
        max_output: 1 << 20,
    };

    fn selection(attributes: Option<&[&str]>, extra: &[(&str, &str)]) -> Selection {
        Selection {
            transform: None,
            attributes: attributes.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            extra_attributes: extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn every_key_of_a_selection_is_listed() {
        for key in Selection::KEYS {
            let value = match key {
                "attributes" => "[]",
                "transform" => "\".\"",
                _ => "{}",
            };
            let parsed: Result<Selection, _> =
                serde_json::from_str(&format!("{{\"{key}\": {value}}}"));
            assert!(parsed.is_ok(), "{key}: {parsed:?}");
        }
    }

    #[test]
    fn selections_are_checked() {
        let e = Shape::new(&selection(Some(&["dss.nope"]), &[]), None).unwrap_err();
        assert_eq!(e.field, "attributes");
        let e = Shape::new(&selection(None, &[("dss.x", "1")]), None).unwrap_err();
        assert_eq!(e.field, "extra_attributes");
        let e = Shape::new(&selection(None, &[("a", "1"), ("b", "2")]), Some(10)).unwrap_err();
        assert!(e.message.contains("11 attributes"), "{e}");
        assert!(Shape::new(&selection(None, &[("a", "1"), ("b", "2")]), None).is_ok());
    }

    #[test]
    fn sent_attributes_follow_the_selection_and_the_limit() {
        let shape = Shape::new(
            &selection(
                Some(&["dss.event_type", "relay.dedup_key"]),
                &[("team", "x")],
            ),
            Some(10),
        )
        .unwrap();
        assert_eq!(
            shape.sent_attributes(),
            ["relay.dedup_key", "dss.event_type", "team"]
        );
        let mut all = Shape::new(&selection(None, &[("team", "x")]), Some(10)).unwrap();
        assert_eq!(all.sent_attributes().len(), 10);
        all.max_attributes = Some(3);
        assert_eq!(
            all.sent_attributes(),
            ["relay.dedup_key", "dss.subscription_id", "dss.bundle_uuid"]
        );
    }

    /// A verified v2 notification.
    fn v2() -> Notification<Verified> {
        const V2: &str = r#"{"subscription_id": "s", "event_type": "CREATE", "match": {"bundle_uuid": "u", "bundle_version": "v"}, "dss_api": "https://dss.example"}"#;
        Notification::parse(bytes::Bytes::from_static(V2.as_bytes()))
            .unwrap()
            .into_verified(Verified::for_tests(Some("hca-dss:x")))
    }

    /// The message of a request that carried no headers, received at the epoch.
    fn unheaded(notification: &Notification<Verified>) -> Message {
        Message::new(
            notification,
            &http::HeaderMap::new(),
            std::time::SystemTime::UNIX_EPOCH,
        )
    }

    #[test]
    #[cfg(feature = "transform")]
    fn a_transform_makes_the_body_and_marks_the_message() {
        let notification = v2();
        let base = unheaded(&notification);
        let transformed = |program: &str| Selection {
            transform: Some(program.to_owned()),
            ..selection(None, &[("team", "x")])
        };
        let mut shape = Shape::new(&transformed("{bundle: .match.bundle_uuid}"), Some(10)).unwrap();
        let message = shape.apply(&base, &notification, LIMITS).unwrap();
        assert_eq!(&message.payload[..], br#"{"bundle":"u"}"#);
        assert_eq!(
            message.attributes.get("relay.dedup_key"),
            Some(notification.dedup_key())
        );
        assert_eq!(message.attributes.get("team"), Some("x"));
        assert_eq!(message.attributes.get(TRANSFORMED), Some("true"));
        // Lowest priority: the first left out where a destination keeps no more.
        shape.max_attributes = Some(message.attributes.len() - 1);
        let message = shape.apply(&base, &notification, LIMITS).unwrap();
        assert_eq!(message.attributes.get(TRANSFORMED), None);
        assert_eq!(message.attributes.get("team"), Some("x"));
        let unlimited = Shape::new(&transformed(".match"), None).unwrap();
        let message = unlimited.apply(&base, &notification, LIMITS).unwrap();
        let last = message.attributes.iter().last();
        assert_eq!(last, Some((TRANSFORMED, "true")));
        // Structured CloudEvents carry the transformed body as their data.
        let envelope = unlimited
            .clone()
            .with_format(Format::Cloudevents, Mode::Structured)
            .apply(&base, &notification, LIMITS)
            .unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&envelope.payload).unwrap();
        assert_eq!(
            envelope["data"],
            serde_json::json!({"bundle_uuid": "u", "bundle_version": "v"})
        );
        // A program that yields nothing is the shape's failure, named as such.
        let empty = Shape::new(&transformed("empty"), None).unwrap();
        assert_eq!(
            empty.apply(&base, &notification, LIMITS).unwrap_err(),
            Unshaped::Transform(RunError::NoValue)
        );
        // One that does not compile is refused with the key and its position.
        let e = Shape::new(&transformed("{a: }"), None).unwrap_err();
        assert_eq!(e.field, "transform");
        assert!(e.message.starts_with("line 1, column 5:"), "{e}");
    }

    #[test]
    fn the_trace_context_is_the_last_attribute_and_the_first_dropped() {
        let notification = v2();
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let headers: http::HeaderMap = [("traceparent", traceparent), ("tracestate", "a=b")]
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect();
        let base = Message::new(&notification, &headers, std::time::SystemTime::UNIX_EPOCH);
        let sns = TraceAttributes {
            traceparent: "traceparent",
            tracestate: None,
        };
        let pubsub = TraceAttributes {
            traceparent: "googclient_traceparent",
            tracestate: Some("googclient_tracestate"),
        };
        // Room for it: last, after the destination's own.
        let few = selection(Some(&["dss.event_type"]), &[("team", "x")]);
        let shape = Shape::new(&few, Some(10)).unwrap().with_trace(sns);
        let message = shape.apply(&base, &notification, LIMITS).unwrap();
        let names: Vec<&str> = message.attributes.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["dss.event_type", "team", "traceparent"]);
        assert_eq!(message.attributes.get("traceparent"), Some(traceparent));
        // As many as the destination keeps already: it is the one left out.
        let mut full = Shape::new(&selection(None, &[("team", "x")]), Some(10)).unwrap();
        let kept = full
            .clone()
            .apply(&base, &notification, LIMITS)
            .unwrap()
            .attributes
            .len();
        full.max_attributes = Some(kept);
        let message = full
            .with_trace(sns)
            .apply(&base, &notification, LIMITS)
            .unwrap();
        assert_eq!(message.attributes.len(), kept);
        assert_eq!(message.attributes.get("traceparent"), None);
        assert_eq!(message.attributes.get("team"), Some("x"));
        // Pub/Sub keeps every attribute, and takes the tracestate too.
        let shape = Shape::new(&Selection::default(), None)
            .unwrap()
            .with_trace(pubsub);
        let message = shape.apply(&base, &notification, LIMITS).unwrap();
        assert_eq!(
            message.attributes.get("googclient_traceparent"),
            Some(traceparent)
        );
        assert_eq!(message.attributes.get("googclient_tracestate"), Some("a=b"));
        // A destination that takes no trace attribute (SQS: a system attribute) gets none.
        let message = Shape::default()
            .apply(&base, &notification, LIMITS)
            .unwrap();
        assert!(message.attributes.iter().all(|(n, _)| !n.contains("trace")));
    }

    #[test]
    fn shaped_messages_share_the_payload_and_the_attribute_text() {
        let notification = v2();
        let base = unheaded(&notification);
        let selected = Shape::new(
            &selection(Some(&["dss.event_type", "dss.kind"]), &[("team", "x")]),
            Some(10),
        )
        .unwrap();
        for shape in [Shape::default(), selected] {
            let message = shape.apply(&base, &notification, LIMITS).unwrap();
            assert_eq!(message.payload.as_ptr(), base.payload.as_ptr());
            for name in ["dss.event_type", "dss.kind"] {
                let (shaped, unshaped) = (message.attributes.get(name), base.attributes.get(name));
                assert_eq!(shaped, unshaped);
                assert_eq!(
                    shaped.map(str::as_ptr),
                    unshaped.map(str::as_ptr),
                    "{name}: the same text, not a copy"
                );
            }
        }
    }

    #[test]
    fn fifo_ids_default_and_standard_queues_refuse_them() {
        let template = Template::parse("{match.bundle_uuid}").unwrap();
        let shape = fifo_ids(Shape::default(), true, Some(&template), None).unwrap();
        assert_eq!(
            shape.group_id.as_ref().map(Template::source),
            Some("{match.bundle_uuid}")
        );
        assert_eq!(
            shape.dedup_id.as_ref().map(Template::source),
            Some("{$dedup_key}")
        );
        let e = fifo_ids(Shape::default(), false, None, Some(&template)).unwrap_err();
        assert_eq!(e.field, "message_deduplication_id");
        assert_eq!(
            fifo_ids(Shape::default(), false, None, None).unwrap(),
            Shape::default()
        );
    }
}
