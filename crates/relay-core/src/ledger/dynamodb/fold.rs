//! Folding an item's oldest attempts away, so that its size does not grow with retries.

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::{ATTEMPTS, FIRST_AT, FOLDED, Item, first_attempt_at, folded_of, n, s};
use super::{DynamoDbLedger, Expr, update_expression};
use crate::ledger::KEPT_ATTEMPTS;

impl DynamoDbLedger {
    /// Folds the oldest attempts of the item `old` was the image of, now `kept` long, down to
    /// [`KEPT_ATTEMPTS`]: one UpdateItem removing them, counting them in `folded` and keeping
    /// the first arrival, conditioned on the list still starting as in `old`. How many it
    /// folded: none when another writer changed the list first, or the call failed (the next
    /// claim tries again).
    pub(super) async fn fold(&self, (bundle, key): (&str, &str), old: &Item, kept: usize) -> usize {
        let count = kept - KEPT_ATTEMPTS;
        let Some(AttributeValue::L(list)) = old.get(ATTEMPTS) else {
            return 0;
        };
        let Some(AttributeValue::M(last)) = list.get(count - 1) else {
            return 0;
        };
        let (Some(AttributeValue::S(last_id)), Some(first)) =
            (last.get("id"), first_attempt_at(old))
        else {
            return 0;
        };
        let mut x = Expr::default();
        let attempts = x.name("#att", ATTEMPTS);
        let id = x.name("#id", "id");
        let folded = x.name("#folded", FOLDED);
        let first_at = x.name("#first", FIRST_AT);
        let was = folded_of(old);
        let unchanged = match was {
            0 => format!("attribute_not_exists({folded})"),
            _ => format!("{folded} = {}", x.value(":was", n(was))),
        };
        let after = x.value(":now", n(was + count));
        let first = x.value(":first", n(first));
        let last_id = x.value(":last", s(last_id));
        // Last first: removed one at a time or all at once, the same elements go.
        let remove: Vec<String> = (0..count)
            .rev()
            .map(|i| format!("{attempts}[{i}]"))
            .collect();
        let set = [
            format!("{folded} = {after}"),
            format!("{first_at} = {first}"),
        ];

        let answer = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(super::item::primary_key(bundle, key)))
            .update_expression(update_expression(&set, &remove))
            .condition_expression(format!(
                "{unchanged} AND {attempts}[{}].{id} = {last_id}",
                count - 1
            ))
            .set_expression_attribute_names(Some(x.names))
            .set_expression_attribute_values(Some(x.values))
            .send()
            .await;
        match answer {
            Ok(_) => count,
            Err(e) => {
                tracing::debug!(table = %self.table, key, error = %aws_smithy_types::error::display::DisplayErrorContext(&e), "Folding a ledger entry's oldest attempts lost to another write; the next claim tries again.");
                0
            }
        }
    }
}
