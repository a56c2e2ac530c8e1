//! The DynamoDB ledger's table in moto (or any DynamoDB endpoint the SDK configuration names),
//! created the way `terraform/modules/aws-relay` creates it.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};

/// Creates the ledger table `name` as the DynamoDB ledger expects it: hash key `bundle_uuid`
/// (S), range key `ledger_key` (S), on demand, no index, and TTL on `expires_at`. Panics when
/// the endpoint refuses: this is test setup.
pub async fn create_ledger_table(sdk: &SdkConfig, name: &str) {
    let client = Client::new(sdk);
    let keys = [
        ("bundle_uuid", KeyType::Hash),
        ("ledger_key", KeyType::Range),
    ];
    create(&client, name, client.create_table(), keys).await;
}

/// Creates `name` as releases before the table was keyed by bundle did: hash key `ledger_key`
/// alone, and the index `by_bundle` on `bundle_uuid` (projection ALL). What `relay ledger
/// migrate` reads.
pub async fn create_earlier_ledger_table(sdk: &SdkConfig, name: &str) {
    let all = Projection::builder().projection_type(ProjectionType::All);
    let index = GlobalSecondaryIndex::builder()
        .index_name("by_bundle")
        .key_schema(key("bundle_uuid", KeyType::Hash))
        .projection(all.build())
        .build()
        .expect("an index");
    let client = Client::new(sdk);
    let table = client.create_table().global_secondary_indexes(index);
    create(&client, name, table, [("ledger_key", KeyType::Hash)]).await;
}

/// Sends `table`'s creation as `name` with the key `keys`, on demand, with both keys'
/// attributes defined, and turns TTL on for `expires_at`.
async fn create<const N: usize>(
    client: &Client,
    name: &str,
    table: CreateTableFluentBuilder,
    keys: [(&str, KeyType); N],
) {
    let table = (keys.into_iter()).fold(table, |t, (k, kind)| t.key_schema(key(k, kind)));
    table
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(text_attribute("bundle_uuid"))
        .attribute_definitions(text_attribute("ledger_key"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("create the ledger table {name}: {e:?}"));
    turn_on_ttl(client, name).await;
}

fn text_attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("an attribute definition")
}

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .expect("a key schema element")
}

async fn turn_on_ttl(client: &Client, name: &str) {
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("expires_at")
                .build()
                .expect("a TTL specification"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("turn on TTL on {name}: {e:?}"));
}

/// Puts `items`, in DynamoDB's JSON form (what `aws dynamodb scan` prints: `{"S": …}`,
/// `{"N": …}`, `{"M": …}`, `{"L": …}`, `{"BOOL": …}`, `{"NULL": true}`, `{"SS": …}`), into
/// `table` as they are. Panics on anything else: this is test setup.
pub async fn put_items(sdk: &SdkConfig, table: &str, items: &serde_json::Value) {
    let client = Client::new(sdk);
    for item in items.as_array().expect("an array of items") {
        let item = item.as_object().expect("an item is an object");
        let item = item
            .iter()
            .map(|(k, v)| (k.clone(), attribute(v)))
            .collect();
        client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .send()
            .await
            .unwrap_or_else(|e| panic!("put an item in {table}: {e:?}"));
    }
}

fn attribute(value: &serde_json::Value) -> AttributeValue {
    let (kind, inner) = value
        .as_object()
        .and_then(|o| o.iter().next())
        .expect("an attribute is {TYPE: value}");
    let text = || inner.as_str().expect("a string").to_owned();
    let texts = || {
        let all = inner.as_array().expect("a list");
        all.iter()
            .map(|s| s.as_str().expect("a string").to_owned())
            .collect()
    };
    match kind.as_str() {
        "S" => AttributeValue::S(text()),
        "N" => AttributeValue::N(text()),
        "BOOL" => AttributeValue::Bool(inner.as_bool().expect("a boolean")),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(texts()),
        "M" => AttributeValue::M(
            inner
                .as_object()
                .expect("a map")
                .iter()
                .map(|(k, v)| (k.clone(), attribute(v)))
                .collect(),
        ),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .expect("a list")
                .iter()
                .map(attribute)
                .collect(),
        ),
        other => panic!("an attribute type these items do not use: {other}"),
    }
}
