//! What the two AWS destinations with FIFO ids share: an SQS queue's table and an SNS topic's
//! are each an address, a message limit, the FIFO id templates and a format, and differ only in
//! the address's name and type, the service's limit, the stable id the address gives and
//! whether messages carry a `traceparent` attribute.

/// Declares the table of such a destination and its [`TargetConfig`](super::TargetConfig):
/// `$name`, with its address field, its `type`, the `noun` its docs use (`queue`, `topic`), the
/// service's message limit and, where the service has no trace header of its own, the
/// attribute that carries the trace context. The destination's module writes its `resource_id`.
macro_rules! fifo_config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(#[$address_meta:meta])*
            pub $address:ident: $address_type:ty,
        }
        type = $type:literal, noun = $noun:literal, limit = $limit:literal
        $(, trace = $trace:literal)?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(#[$address_meta])*
            pub $address: $address_type,
            #[doc = concat!(
                "Body plus attributes above this get 413 before any call (default ", $limit,
                ", the service's limit)."
            )]
            #[serde(default, skip_serializing_if = "crate::sink::MessageLimit::is_default")]
            pub max_message_bytes: $crate::sink::MessageLimit<$limit>,
            #[doc = concat!(
                "FIFO ", $noun, "s: the `MessageGroupId` template (default `{subscription_id}`)."
            )]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub message_group_id: Option<$crate::sink::Template>,
            #[doc = concat!(
                "FIFO ", $noun, "s: the `MessageDeduplicationId` template (default `{$dedup_key}`)."
            )]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub message_deduplication_id: Option<$crate::sink::Template>,
            /// `cloudevents`: send CloudEvents (docs/destinations.md); default `raw`.
            #[serde(default, skip_serializing_if = "crate::sink::Format::is_raw")]
            pub format: $crate::sink::Format,
        }

        impl $name {
            #[doc = concat!("A ", $noun, " with the default limit and FIFO ids.")]
            pub fn new($address: $address_type) -> Self {
                Self {
                    $address,
                    max_message_bytes: Default::default(),
                    message_group_id: None,
                    message_deduplication_id: None,
                    format: $crate::sink::Format::Raw,
                }
            }

            #[doc = concat!("True for a FIFO ", $noun, ": its name ends in `.fifo`.")]
            pub(crate) fn is_fifo(&self) -> bool {
                self.$address.as_str().ends_with(".fifo")
            }

            /// `shape` with this destination's format and, on a FIFO one, its ids.
            fn fifo_shape(
                &self,
                shape: $crate::sink::Shape,
            ) -> Result<$crate::sink::Shape, $crate::sink::ShapeError> {
                let mode = $crate::sink::shape::Mode::Structured;
                $crate::sink::shape::fifo_ids(
                    shape.with_format(self.format, mode),
                    self.is_fifo(),
                    self.message_group_id.as_ref(),
                    self.message_deduplication_id.as_ref(),
                )
            }
        }

        impl $crate::sink::TargetConfig for $name {
            fn kind(&self) -> &'static str {
                $type
            }

            fn max_message_bytes(&self) -> Option<usize> {
                Some(self.max_message_bytes.get())
            }

            fn resource(&self) -> String {
                self.resource_id()
            }

            fn describe(&self) -> String {
                let (address, max) = (&self.$address, self.max_message_bytes);
                format!(concat!($type, " {} (max {} bytes)"), address, max)
            }

            fn shape(
                &self,
                selection: &$crate::sink::Selection,
            ) -> Result<$crate::sink::Shape, $crate::sink::ShapeError> {
                let max_attributes = Some($crate::sink::AWS_MAX_ATTRIBUTES);
                let shape = $crate::sink::Shape::new(selection, max_attributes)?;
                $(let shape = shape.with_trace($crate::sink::shape::TraceAttributes {
                    traceparent: $trace,
                    tracestate: None,
                });)?
                self.fifo_shape(shape)
            }
        }
    };
}

pub(super) use fifo_config;
