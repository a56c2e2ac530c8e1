//! Keys kept in AWS Secrets Manager, read once at start: the DSS's HMAC keys
//! (`RELAY_HMAC_KEYS_SECRET_ARN`) and a source's (`secret_arn`).

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_sdk_secretsmanager::config::Region;
use aws_smithy_types::error::display::DisplayErrorContext;

use crate::config::HmacKeys;
use crate::verify::Secret;

/// The keys in the secret: a `RELAY_HMAC_KEYS` JSON object, or one plain secret for any keyId.
pub(crate) async fn load_keys(
    sdk: &SdkConfig,
    arn: &str,
) -> Result<(BTreeMap<String, Secret>, Option<Secret>), String> {
    let value = load_text(sdk, arn).await?;
    if value.trim_start().starts_with('{') {
        Ok((HmacKeys::from_json(&value).map_err(|e| e.0)?.0, None))
    } else {
        Ok((BTreeMap::new(), Some(Secret::new(value.trim()))))
    }
}

/// The secret's text (its `SecretString`), trimmed.
pub(crate) async fn load_text(sdk: &SdkConfig, arn: &str) -> Result<String, String> {
    let mut config = aws_sdk_secretsmanager::config::Builder::from(sdk);
    if let Some(region) = arn.split(':').nth(3) {
        config = config.region(Region::new(region.to_owned()));
    }
    let client = aws_sdk_secretsmanager::Client::from_conf(config.build());
    let output = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| format!("cannot read the secret: {}", DisplayErrorContext(&e)))?;
    let value = output
        .secret_string()
        .filter(|s| !s.trim().is_empty())
        .ok_or("the secret has no SecretString")?;
    Ok(value.trim().to_owned())
}
