//! The ledger's `UpdateItem` calls (a claim, a settlement) written and read on the wire,
//! DynamoDB's JSON protocol, and sent by [`AwsJson`]: through the SDK each cost about 87 µs of
//! CPU, more than the rest of a notification's path. The item is built with the SDK's
//! [`AttributeValue`] as before; only the request and its answer are written and read here. The
//! rarer calls (an expired item's reset, a fold, the reads of `relay trace`) stay on the SDK.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::Deserialize;

use super::item::Item;
use crate::cloud::aws_json::{AwsJson, CallError, NO_REGION, Service, client_of, read};
use crate::json;

/// One `UpdateItem` of the ledger: the old image on success (`ReturnValues=ALL_OLD`), and the
/// image a failed condition was checked against (`ReturnValuesOnConditionCheckFailure=ALL_OLD`).
pub(super) struct Update<'a> {
    pub(super) table: &'a str,
    pub(super) key: &'a Item,
    pub(super) update: &'a str,
    pub(super) condition: &'a str,
    pub(super) names: &'a HashMap<String, String>,
    pub(super) values: &'a Item,
    /// Whether to ask for the old image.
    pub(super) old_image: bool,
}

/// DynamoDB's JSON protocol.
const DYNAMODB: Service = Service {
    service_id: "DynamoDB",
    signing_name: "dynamodb",
    target_prefix: "DynamoDB_20120810",
    content_type: "application/x-amz-json-1.0",
};

/// The client of DynamoDB's endpoint for the relay's configuration: the one the SDK's client
/// would call (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL`, the region's, FIPS and dual
/// stack as configured), at its regional name rather than an account's.
pub(super) async fn client(sdk: &aws_config::SdkConfig) -> Result<AwsJson, String> {
    let region = sdk.region().ok_or(NO_REGION)?.to_string();
    client_of!(
        aws_sdk_dynamodb::config::endpoint,
        sdk,
        &region,
        &DYNAMODB,
        account_id_endpoint_mode = "disabled"
    )
    .await
}

/// Sends `update`: the item as it was before it (empty unless asked for), or the image its
/// condition failed on (`None` when the item did not exist).
pub(super) async fn update_item(
    api: &AwsJson,
    update: &Update<'_>,
) -> Result<Result<Item, Option<Item>>, CallError> {
    match api.call("UpdateItem", body(update)).await {
        Ok(answer) => Ok(Ok(item_of(read::<Images>(&answer)?.attributes))),
        Err(CallError::Service { code, body, .. }) if code == "ConditionalCheckFailedException" => {
            let failed = read::<Images>(&body)?.item;
            Ok(Err(failed.map(|image| item_of(Some(image)))))
        }
        Err(e) => Err(e),
    }
}

/// The table's keys (`(name, HASH or RANGE)`) by `DescribeTable`, which also opens the
/// connection the claims take: `None` when the call is refused (a role that may not describe
/// the table), which is an answer all the same.
pub(super) async fn keys(
    api: &AwsJson,
    table: &str,
) -> Result<Option<Vec<(String, String)>>, CallError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Described {
        table: Option<Table>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Table {
        #[serde(default)]
        key_schema: Vec<Key>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Key {
        attribute_name: String,
        key_type: String,
    }
    let mut body = b"{\"TableName\":".to_vec();
    json::string(&mut body, table);
    body.push(b'}');
    let Some(answer) = api.warm("DescribeTable", Bytes::from(body)).await? else {
        return Ok(None);
    };
    let described: Described = read(&answer)?;
    let keys = described.table.map_or_else(Vec::new, |t| t.key_schema);
    Ok(Some(
        keys.into_iter()
            .map(|k| (k.attribute_name, k.key_type))
            .collect(),
    ))
}

/// The request's JSON.
fn body(update: &Update<'_>) -> Bytes {
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(b"{\"TableName\":");
    json::string(&mut out, update.table);
    out.extend_from_slice(b",\"Key\":");
    map(&mut out, update.key.iter());
    out.extend_from_slice(b",\"UpdateExpression\":");
    json::string(&mut out, update.update);
    out.extend_from_slice(b",\"ConditionExpression\":");
    json::string(&mut out, update.condition);
    out.extend_from_slice(b",\"ExpressionAttributeNames\":");
    json::list(
        &mut out,
        *b"{}",
        update.names,
        |out, (placeholder, name)| {
            json::string(out, placeholder);
            out.push(b':');
            json::string(out, name);
        },
    );
    out.extend_from_slice(b",\"ExpressionAttributeValues\":");
    map(&mut out, update.values.iter());
    if update.old_image {
        out.extend_from_slice(b",\"ReturnValues\":\"ALL_OLD\"");
    }
    out.extend_from_slice(b",\"ReturnValuesOnConditionCheckFailure\":\"ALL_OLD\"}");
    Bytes::from(out)
}

/// A map of attribute values, `{"name":{"S":"…"},…}`.
fn map<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a String, &'a AttributeValue)>) {
    json::list(out, *b"{}", entries, |out, (name, value)| {
        json::string(out, name);
        out.push(b':');
        attribute(out, value);
    });
}

/// One attribute value, `{"S":"…"}`, as DynamoDB's JSON protocol writes it.
fn attribute(out: &mut Vec<u8>, value: &AttributeValue) {
    let texts = |out: &mut Vec<u8>, items: &mut dyn Iterator<Item = &str>| {
        json::list(out, *b"[]", items, json::string);
    };
    let tag: &[u8] = match value {
        AttributeValue::S(_) => b"{\"S\":",
        AttributeValue::N(_) => b"{\"N\":",
        AttributeValue::B(_) => b"{\"B\":",
        AttributeValue::Ss(_) => b"{\"SS\":",
        AttributeValue::Ns(_) => b"{\"NS\":",
        AttributeValue::Bs(_) => b"{\"BS\":",
        AttributeValue::M(_) => b"{\"M\":",
        AttributeValue::L(_) => b"{\"L\":",
        AttributeValue::Bool(_) => b"{\"BOOL\":",
        _ => b"{\"NULL\":",
    };
    out.extend_from_slice(tag);
    match value {
        AttributeValue::S(text) | AttributeValue::N(text) => json::string(out, text),
        AttributeValue::B(blob) => json::string(out, &STANDARD.encode(blob.as_ref())),
        AttributeValue::Ss(list) | AttributeValue::Ns(list) => {
            texts(out, &mut list.iter().map(String::as_str))
        }
        AttributeValue::Bs(list) => {
            let encoded: Vec<String> = list.iter().map(|b| STANDARD.encode(b.as_ref())).collect();
            texts(out, &mut encoded.iter().map(String::as_str))
        }
        AttributeValue::M(entries) => map(out, entries.iter()),
        AttributeValue::L(list) => json::list(out, *b"[]", list, attribute),
        AttributeValue::Bool(false) => out.extend_from_slice(b"false"),
        // `{"BOOL":true}`, and `{"NULL":true}` (the only null there is).
        _ => out.extend_from_slice(b"true"),
    }
    out.push(b'}');
}

/// An attribute value as the protocol reads it.
#[derive(Deserialize)]
enum Wire {
    S(String),
    N(String),
    B(String),
    #[serde(rename = "SS")]
    Ss(Vec<String>),
    #[serde(rename = "NS")]
    Ns(Vec<String>),
    #[serde(rename = "BS")]
    Bs(Vec<String>),
    M(HashMap<String, Wire>),
    L(Vec<Wire>),
    #[serde(rename = "NULL")]
    Null(bool),
    #[serde(rename = "BOOL")]
    Bool(bool),
}

impl From<Wire> for AttributeValue {
    fn from(wire: Wire) -> Self {
        let blob = |text: String| Blob::new(STANDARD.decode(text).unwrap_or_default());
        match wire {
            Wire::S(text) => Self::S(text),
            Wire::N(text) => Self::N(text),
            Wire::B(text) => Self::B(blob(text)),
            Wire::Ss(list) => Self::Ss(list),
            Wire::Ns(list) => Self::Ns(list),
            Wire::Bs(list) => Self::Bs(list.into_iter().map(blob).collect()),
            Wire::M(entries) => Self::M(entries.into_iter().map(|(k, v)| (k, v.into())).collect()),
            Wire::L(list) => Self::L(list.into_iter().map(Self::from).collect()),
            Wire::Null(null) => Self::Null(null),
            Wire::Bool(flag) => Self::Bool(flag),
        }
    }
}

/// The images an `UpdateItem` answer may carry: the old item of a write, the item a condition
/// failed on.
#[derive(Deserialize, Default)]
struct Images {
    #[serde(rename = "Attributes")]
    attributes: Option<HashMap<String, Wire>>,
    #[serde(rename = "Item")]
    item: Option<HashMap<String, Wire>>,
}

fn item_of(image: Option<HashMap<String, Wire>>) -> Item {
    (image.unwrap_or_default().into_iter())
        .map(|(name, value)| (name, value.into()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of value, nested.
    fn every_kind() -> Item {
        let blob = || Blob::new(vec![0, 1, 254, 255]);
        let list = AttributeValue::L(vec![
            AttributeValue::N("-1.5".into()),
            AttributeValue::Bool(false),
            AttributeValue::Null(true),
        ]);
        Item::from([
            (
                "s".into(),
                AttributeValue::S("a \"quoted\"\n line ✓".into()),
            ),
            ("n".into(), AttributeValue::N("1800000000000".into())),
            ("b".into(), AttributeValue::B(blob())),
            (
                "ss".into(),
                AttributeValue::Ss(vec!["x".into(), "y".into()]),
            ),
            (
                "ns".into(),
                AttributeValue::Ns(vec!["1".into(), "2".into()]),
            ),
            ("bs".into(), AttributeValue::Bs(vec![blob()])),
            ("bool".into(), AttributeValue::Bool(true)),
            ("l".into(), list.clone()),
            (
                "m".into(),
                AttributeValue::M(Item::from([("inner".into(), list)])),
            ),
        ])
    }

    #[test]
    fn values_read_back_as_they_were_written() {
        let item = every_kind();
        let mut written = b"{\"Attributes\":".to_vec();
        map(&mut written, item.iter());
        written.push(b'}');
        let read = item_of(read::<Images>(&written).unwrap().attributes);
        assert_eq!(read, item);
    }

    #[test]
    fn an_update_is_the_protocol_s_json() {
        let key = Item::from([("bundle_uuid".into(), AttributeValue::S("b".into()))]);
        let names = HashMap::from([("#n".to_owned(), "attempts".to_owned())]);
        let values = Item::from([(":v".into(), AttributeValue::N("1".into()))]);
        let update = |old_image| Update {
            table: "ledger",
            key: &key,
            update: "SET #n = :v",
            condition: "attribute_exists(#n)",
            names: &names,
            values: &values,
            old_image,
        };
        let written: serde_json::Value = serde_json::from_slice(&body(&update(true))).unwrap();
        assert_eq!(
            written,
            serde_json::json!({
                "TableName": "ledger",
                "Key": {"bundle_uuid": {"S": "b"}},
                "UpdateExpression": "SET #n = :v",
                "ConditionExpression": "attribute_exists(#n)",
                "ExpressionAttributeNames": {"#n": "attempts"},
                "ExpressionAttributeValues": {":v": {"N": "1"}},
                "ReturnValues": "ALL_OLD",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            })
        );
        let written: serde_json::Value = serde_json::from_slice(&body(&update(false))).unwrap();
        assert!(written.get("ReturnValues").is_none(), "{written}");
    }

    #[test]
    fn an_answer_that_is_not_the_protocol_s_json_is_no_answer() {
        for answer in [&b"<html>"[..], b"{\"Attributes\":{\"a\":{\"X\":1}}}", b""] {
            let error = read::<Images>(answer).err().expect("unreadable");
            assert!(error.is_retryable(), "{error}");
        }
        assert!(read::<Images>(b"{}").unwrap().attributes.is_none());
    }
}
