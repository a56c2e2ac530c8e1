//! A DynamoDB-protocol endpoint on loopback, in memory, for the benchmark and the fault matrix:
//! the ledger's table (any name; items keyed by the hash key `bundle_uuid` and the range key
//! `ledger_key`), answering the AWS JSON 1.0 protocol the SDK speaks
//! (`X-Amz-Target: DynamoDB_20120810.UpdateItem`, …): UpdateItem, PutItem, GetItem, Query and
//! DescribeTable. It evaluates the condition and update expressions the ledger sends (parsed
//! in `expression`, applied in `evaluate`), answers `ConditionalCheckFailedException` as
//! DynamoDB does (with the old `Item` when asked), counts calls by operation, and has fault
//! switches: throttling, 503s and a fixed latency, each on every call while set.

mod evaluate;
mod expression;

use crate::loopback::AwsCall;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Map, Value, json};

use evaluate::holds;
use expression::{Invalid, Item, Parser};

/// The table's hash key.
pub const HASH_KEY: &str = "bundle_uuid";
/// The table's range key.
pub const RANGE_KEY: &str = "ledger_key";

/// An item's primary key: its hash and range keys.
type Key = (String, String);

/// The operations the endpoint answers, in [`Calls`]' order.
const OPERATIONS: [&str; 5] = ["UpdateItem", "PutItem", "GetItem", "Query", "DescribeTable"];

const CONDITION_FAILED: &str = "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException";
const THROTTLED: &str = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException";
const VALIDATION: &str = "com.amazon.coral.validate#ValidationException";
const UNKNOWN_OPERATION: &str = "com.amazon.coral.service#UnknownOperationException";

/// The running endpoint. Clones share it.
#[derive(Debug, Clone)]
pub struct FakeDynamoDb {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    items: Mutex<HashMap<Key, Item>>,
    /// One counter per [`OPERATIONS`] entry, then one for anything else.
    calls: [AtomicU64; OPERATIONS.len() + 1],
    throttled: AtomicBool,
    unavailable: AtomicBool,
    latency_us: AtomicU64,
}

/// Calls received so far, by operation (every call, refused ones included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls(pub BTreeMap<&'static str, u64>);

impl Calls {
    /// Calls of `operation` (`"UpdateItem"`, …).
    pub fn of(&self, operation: &str) -> u64 {
        self.0.get(operation).copied().unwrap_or(0)
    }

    /// Every call.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The calls made since `before`.
    pub fn since(&self, before: &Calls) -> Calls {
        Calls(
            (self.0.iter())
                .map(|(op, n)| (*op, n.saturating_sub(before.of(op))))
                .collect(),
        )
    }
}

impl FakeDynamoDb {
    /// Starts the endpoint on a free loopback port, on the current Tokio runtime.
    pub async fn start() -> Self {
        let state = Arc::new(State::default());
        let endpoint = crate::loopback::serve_with(Arc::clone(&state), answer).await;
        Self { endpoint, state }
    }

    /// The AWS configuration of this endpoint: region `us-east-1`, fixed credentials.
    pub fn sdk_config(&self) -> aws_config::SdkConfig {
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .http_client(relay_core::cloud::aws_http_client())
            .endpoint_url(&self.endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
                aws_sdk_dynamodb::config::Credentials::new("fake", "fake", None, None, "fake"),
            ))
            .build()
    }

    /// An SDK client of this endpoint.
    pub fn client(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config())
    }

    /// The calls received so far, by operation.
    pub fn calls(&self) -> Calls {
        let counts = (OPERATIONS.iter().chain(&["other"]))
            .zip(&self.state.calls)
            .map(|(op, n)| (*op, n.load(Ordering::Relaxed)))
            .collect();
        Calls(counts)
    }

    /// While on, every call is answered 400 `ProvisionedThroughputExceededException`.
    pub fn set_throttled(&self, on: bool) {
        self.state.throttled.store(on, Ordering::Relaxed);
    }

    /// While on, every call is answered 503.
    pub fn set_unavailable(&self, on: bool) {
        self.state.unavailable.store(on, Ordering::Relaxed);
    }

    /// Every call is answered after `latency` (zero: at once).
    pub fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.state.latency_us.store(us, Ordering::Relaxed);
    }

    /// The item whose range key is `key`, in the JSON form of its attribute values.
    pub fn item(&self, key: &str) -> Option<Map<String, Value>> {
        let items = self.state.items.lock().expect("not poisoned");
        items
            .iter()
            .find_map(|((_, range), item)| (range == key).then(|| item.clone()))
    }

    /// How many items the table holds.
    pub fn len(&self) -> usize {
        self.state.items.lock().expect("not poisoned").len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

type Reply = Result<hyper::Response<Full<Bytes>>, std::convert::Infallible>;

/// What a call is answered with when it is not answered 200.
#[derive(Debug)]
enum Refusal {
    Invalid(Invalid),
    ConditionFailed(Option<Item>),
}

impl From<Invalid> for Refusal {
    fn from(invalid: Invalid) -> Self {
        Self::Invalid(invalid)
    }
}

async fn answer(state: Arc<State>, request: hyper::Request<hyper::body::Incoming>) -> Reply {
    let call = AwsCall::read(request).await;
    let operation = call.operation("DynamoDB_20120810.");
    let index = OPERATIONS
        .iter()
        .position(|op| *op == operation)
        .unwrap_or(OPERATIONS.len());
    state.calls[index].fetch_add(1, Ordering::Relaxed);
    let latency = state.latency_us.load(Ordering::Relaxed);
    if latency > 0 {
        tokio::time::sleep(Duration::from_micros(latency)).await;
    }
    if state.unavailable.load(Ordering::Relaxed) {
        let error = json!({"__type": "com.amazonaws.dynamodb.v20120810#ServiceUnavailable", "message": "injected"});
        return Ok(respond(503, &error));
    }
    if state.throttled.load(Ordering::Relaxed) {
        let error = json!({"__type": THROTTLED, "message": "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."});
        return Ok(respond(400, &error));
    }
    let input = match &call.input {
        Value::Object(_) => &call.input,
        _ => {
            let error = json!({"__type": "com.amazon.coral.service#SerializationException", "message": "not a JSON object"});
            return Ok(respond(400, &error));
        }
    };
    let answered = match operation {
        "UpdateItem" => update_item(&state, input),
        "PutItem" => put_item(&state, input),
        "GetItem" => get_item(&state, input),
        "Query" => query(&state, input),
        "DescribeTable" => Ok(describe_table(&state, input)),
        other => {
            let error = json!({"__type": UNKNOWN_OPERATION, "message": format!("unknown operation {other:?}")});
            return Ok(respond(400, &error));
        }
    };
    Ok(match answered {
        Ok(output) => respond(200, &output),
        Err(Refusal::Invalid(e)) => respond(400, &json!({"__type": VALIDATION, "message": e.0})),
        Err(Refusal::ConditionFailed(item)) => {
            let mut error =
                json!({"__type": CONDITION_FAILED, "message": "The conditional request failed"});
            if let Some(item) = item {
                error["Item"] = Value::Object(item);
            }
            respond(400, &error)
        }
    })
}

fn respond(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    crate::loopback::aws_reply(status, body)
}

fn object<'a>(input: &'a Value, field: &str) -> &'a Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    input[field]
        .as_object()
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// A request's `ExpressionAttributeNames` and `ExpressionAttributeValues`: absent, or not
/// empty (DynamoDB refuses an empty map).
fn placeholders(input: &Value) -> Result<Parser<'_>, Invalid> {
    for field in ["ExpressionAttributeNames", "ExpressionAttributeValues"] {
        if input[field].as_object().is_some_and(Map::is_empty) {
            return Err(Invalid(format!("{field} must not be empty")));
        }
    }
    Ok(Parser::new(
        object(input, "ExpressionAttributeNames"),
        object(input, "ExpressionAttributeValues"),
    ))
}

fn text<'a>(input: &'a Value, field: &str) -> Option<&'a str> {
    input[field].as_str()
}

/// The primary key of `key` (a `Key`, or a whole `Item`): its `bundle_uuid` and `ledger_key`
/// (S, not empty).
fn primary_key(key: &Map<String, Value>, whole_item: bool) -> Result<Key, Invalid> {
    let refuse = || Invalid("The provided key element does not match the schema".into());
    if !whole_item && key.len() != 2 {
        return Err(refuse());
    }
    let text = |name| match key.get(name).and_then(|v| v.get("S")) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        _ => Err(refuse()),
    };
    Ok((text(HASH_KEY)?, text(RANGE_KEY)?))
}

fn return_values(input: &Value, allowed: &[&str]) -> Result<String, Invalid> {
    let asked = text(input, "ReturnValues").unwrap_or("NONE");
    match allowed.contains(&asked) {
        true => Ok(asked.to_owned()),
        false => Err(Invalid(format!(
            "ReturnValues {asked} is not supported here (the fake answers {allowed:?})"
        ))),
    }
}

/// Whether a failed condition carries the old item (`ReturnValuesOnConditionCheckFailure`).
fn old_on_failure(input: &Value) -> Result<bool, Invalid> {
    match text(input, "ReturnValuesOnConditionCheckFailure").unwrap_or("NONE") {
        "NONE" => Ok(false),
        "ALL_OLD" => Ok(true),
        other => Err(Invalid(format!(
            "ReturnValuesOnConditionCheckFailure {other} is not valid"
        ))),
    }
}

fn update_item(state: &State, input: &Value) -> Result<Value, Refusal> {
    let key = primary_key(object(input, "Key"), false)?;
    let mut parser = placeholders(input)?;
    let update = match text(input, "UpdateExpression") {
        Some(expression) => parser.update(expression)?,
        None => return Err(Invalid("UpdateExpression is required by the fake".into()).into()),
    };
    let condition = (text(input, "ConditionExpression"))
        .map(|c| parser.condition(c))
        .transpose()?;
    parser.finish()?;
    let returned = return_values(input, &["NONE", "ALL_OLD", "ALL_NEW"])?;
    let old_on_failure = old_on_failure(input)?;
    for (path, _) in &update.set {
        for name in [HASH_KEY, RANGE_KEY] {
            if path.0 == [expression::Step::Field(name.into())] {
                return Err(Invalid(format!(
                    "Cannot update attribute {name}. This attribute is part of the key"
                ))
                .into());
            }
        }
    }
    let mut items = state.items.lock().expect("not poisoned");
    let existing = items.get(&key);
    let empty = Item::new();
    let old = existing.unwrap_or(&empty);
    if let Some(condition) = &condition
        && !holds(old, condition)?
    {
        return Err(Refusal::ConditionFailed(
            existing.filter(|_| old_on_failure).cloned(),
        ));
    }
    let mut new = evaluate::apply(old, &update)?;
    new.insert(HASH_KEY.into(), json!({ "S": key.0.clone() }));
    new.insert(RANGE_KEY.into(), json!({ "S": key.1.clone() }));
    let output = match returned.as_str() {
        "ALL_OLD" => existing.map(|old| json!({ "Attributes": old })),
        "ALL_NEW" => Some(json!({ "Attributes": new })),
        _ => None,
    };
    items.insert(key, new);
    Ok(output.unwrap_or_else(|| json!({})))
}

fn put_item(state: &State, input: &Value) -> Result<Value, Refusal> {
    let item = object(input, "Item");
    let key = primary_key(item, true)?;
    let mut parser = placeholders(input)?;
    let condition = (text(input, "ConditionExpression"))
        .map(|c| parser.condition(c))
        .transpose()?;
    parser.finish()?;
    let returned = return_values(input, &["NONE", "ALL_OLD"])?;
    let old_on_failure = old_on_failure(input)?;
    let mut items = state.items.lock().expect("not poisoned");
    let existing = items.get(&key);
    if let Some(condition) = &condition
        && !holds(existing.unwrap_or(&Item::new()), condition)?
    {
        return Err(Refusal::ConditionFailed(
            existing.filter(|_| old_on_failure).cloned(),
        ));
    }
    let old = items.insert(key, item.clone());
    Ok(match (returned.as_str(), old) {
        ("ALL_OLD", Some(old)) => json!({ "Attributes": old }),
        _ => json!({}),
    })
}

fn get_item(state: &State, input: &Value) -> Result<Value, Refusal> {
    let key = primary_key(object(input, "Key"), false)?;
    let items = state.items.lock().expect("not poisoned");
    Ok(match items.get(&key) {
        Some(item) => json!({ "Item": item }),
        None => json!({}),
    })
}

/// A query of the table, every match on one page (the fake does not page).
fn query(state: &State, input: &Value) -> Result<Value, Refusal> {
    if let Some(index) = text(input, "IndexName") {
        let refusal = format!("The table does not have the specified index: {index}");
        return Err(Invalid(refusal).into());
    }
    let mut parser = placeholders(input)?;
    let Some(key_condition) = text(input, "KeyConditionExpression") else {
        return Err(Invalid("KeyConditionExpression is required by the fake".into()).into());
    };
    let key_condition = parser.condition(key_condition)?;
    let filter = (text(input, "FilterExpression"))
        .map(|c| parser.condition(c))
        .transpose()?;
    parser.finish()?;
    let items = state.items.lock().expect("not poisoned");
    let mut found = Vec::new();
    for item in items.values() {
        if holds(item, &key_condition)? && filter.as_ref().map_or(Ok(true), |f| holds(item, f))? {
            found.push(Value::Object(item.clone()));
        }
    }
    Ok(json!({ "Items": found, "Count": found.len(), "ScannedCount": found.len() }))
}

fn describe_table(state: &State, input: &Value) -> Value {
    let name = text(input, "TableName").unwrap_or("ledger");
    let count = state.items.lock().expect("not poisoned").len();
    json!({"Table": {
        "TableName": name,
        "TableStatus": "ACTIVE",
        "ItemCount": count,
        "KeySchema": [
            {"AttributeName": HASH_KEY, "KeyType": "HASH"},
            {"AttributeName": RANGE_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": HASH_KEY, "AttributeType": "S"},
            {"AttributeName": RANGE_KEY, "AttributeType": "S"},
        ],
        "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_condition_answers_as_dynamodb_does() {
        use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
        use aws_sdk_dynamodb::types::{
            AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure,
        };
        let fake = FakeDynamoDb::start().await;
        let client = fake.client();
        let key = std::collections::HashMap::from([
            (HASH_KEY.to_owned(), AttributeValue::S("b".into())),
            (RANGE_KEY.to_owned(), AttributeValue::S("k".into())),
        ]);
        let update = || {
            (client.update_item().table_name("ledger"))
                .set_key(Some(key.clone()))
                .update_expression("SET #n = if_not_exists(#n, :one)")
                .condition_expression("attribute_not_exists(#n)")
                .expression_attribute_names("#n", "n")
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .return_values(ReturnValue::AllNew)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
        };
        let first = update().send().await.expect("the first write");
        let attributes = first.attributes.expect("ALL_NEW");
        assert_eq!(attributes["n"], AttributeValue::N("1".into()));
        assert_eq!(attributes[RANGE_KEY], AttributeValue::S("k".into()));
        let second = update().send().await.expect_err("the condition fails");
        let Some(UpdateItemError::ConditionalCheckFailedException(failed)) =
            second.as_service_error()
        else {
            panic!("not ConditionalCheckFailedException: {second:?}")
        };
        assert_eq!(
            failed.item.as_ref().map(|i| i["n"].clone()),
            Some(AttributeValue::N("1".into()))
        );

        fake.set_throttled(true);
        let get = || {
            (client.get_item().table_name("ledger"))
                .set_key(Some(key.clone()))
                .send()
        };
        let throttled = get().await.expect_err("throttled");
        assert!(
            throttled
                .as_service_error()
                .is_some_and(|e| e.is_provisioned_throughput_exceeded_exception()),
            "{throttled:?}"
        );
        fake.set_throttled(false);
        let calls = fake.calls();
        assert_eq!(calls.of("UpdateItem"), 2);
        // The SDK retries a throttled call (3 attempts in all, by default).
        assert_eq!(calls.of("GetItem"), 3);
        let unused = get().await.expect("answered");
        assert!(unused.item.is_some());
    }
}
