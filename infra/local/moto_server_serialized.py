"""moto_server, with its conditional writes applied one at a time (infra/local/emulators.sh runs it).

DynamoDB applies the writes to one item one at a time, and S3 the writes to one object: a
conditional write (DynamoDB's ConditionExpression, S3's If-Match and If-None-Match) is atomic.
moto checks the condition and then writes, in two steps and without a lock, and its server runs
each request in its own thread, so two concurrent conditional writes can both pass and one
update is lost. The delivery ledger's tests (one claim granted among many at once) and the
stored routes' tests (two `relay split` writers lose no update) rely on the atomicity, so this
runs moto_server's main, with the same arguments, after wrapping DynamoDB's handler and S3's
object writes (PUT, POST and DELETE on a key) in one lock each. Reads, and every other service,
run concurrently, as before.

SQS: moto keeps a queue's RedriveAllowPolicy when it is set but never returns it, so Terraform's
aws_sqs_queue_redrive_allow_policy waits for it forever; GetQueueAttributes returns it here, as
SQS does, which lets the aws-relay module (its dead-letter queue) apply to moto whole. Two more
keep a second apply of the same configuration from planning changes that AWS would not: moto
drops a queue's Policy whenever another attribute is set (as the redrive-allow policy is), and
writes the RedrivePolicy it returns with spaces, where SQS returns compact JSON; here the
Policy stays and the JSON is compact. Lambda: moto keeps no LoggingConfig, which Lambda always
returns (Text, the function's log group, by default); here it keeps what was set, else that.

S3 bucket policies: moto evaluates a condition with StringEquals only, takes every other
condition (Bool, Null, NumericLessThan) as met, and checks no principal, so each conditional Deny
of the modules' buckets (TLS only, minimum TLS 1.2, the relay's no-overwrite) would deny every
request to them. A Deny with a condition is left out of the evaluation here, as a condition
that is not met; the rest of the policy is evaluated as moto does. (The relay's writes carry
If-None-Match, which moto enforces, whatever the policy.)
"""

import json
import sys
import threading

from moto.dynamodb.responses import DynamoHandler
from moto.awslambda.models import LambdaFunction
from moto.iam.access_control import IAMPolicy, PermissionResult
from moto.s3.models import FakeBucket
from moto.s3.responses import S3Response
from moto.server import main
from moto.sqs.models import Queue

_dynamodb = threading.Lock()
_call_action = DynamoHandler.call_action


def _dynamodb_one_at_a_time(self):
    with _dynamodb:
        return _call_action(self)


_s3_writes = threading.Lock()
_key_response = S3Response._key_response


def _s3_writes_one_at_a_time(self, request, full_url):
    if request.method in ("PUT", "POST", "DELETE"):
        with _s3_writes:
            return _key_response(self, request, full_url)
    return _key_response(self, request, full_url)


def _without_conditional_denies(self, action, resource):
    if self.policy is None:
        return PermissionResult.NEUTRAL
    document = json.loads(self.policy)
    statements = document.get("Statement", [])
    if isinstance(statements, dict):
        statements = [statements]
    document["Statement"] = [
        s for s in statements if not (s.get("Effect") == "Deny" and s.get("Condition"))
    ]
    return IAMPolicy(json.dumps(document)).is_action_permitted(action, resource)


FakeBucket.get_permission = _without_conditional_denies
Queue.redrive_allow_policy = None
# Asking for it by name is valid (the names are checked against these lists).
Queue.KMS_ATTRIBUTES = Queue.KMS_ATTRIBUTES + ["RedriveAllowPolicy"]
_queue_attributes = Queue.attributes.fget


def _with_redrive_allow_policy(self):
    result = _queue_attributes(self)
    result.pop("RedriveAllowPolicy", None)
    if self.redrive_allow_policy:
        result["RedriveAllowPolicy"] = self.redrive_allow_policy
    if self.redrive_policy:
        result["RedrivePolicy"] = json.dumps(self.redrive_policy, separators=(",", ":"))
    return result


Queue.attributes = property(_with_redrive_allow_policy)
_set_queue_attributes = Queue._set_attributes


def _keeping_the_policy(self, attributes, now=None):
    policy = getattr(self, "policy", None)
    _set_queue_attributes(self, attributes, now)
    if "Policy" not in attributes:
        self.policy = policy


Queue._set_attributes = _keeping_the_policy
_lambda_init = LambdaFunction.__init__
_lambda_configuration = LambdaFunction.get_configuration
_lambda_update = LambdaFunction.update_configuration


def _lambda_keeping_logging(self, account_id, spec, region, version=1):
    _lambda_init(self, account_id, spec, region, version)
    self.logging_config = spec.get("LoggingConfig")


def _lambda_logging(self, on_create=False):
    config = _lambda_configuration(self, on_create)
    default = {"LogFormat": "Text", "LogGroup": f"/aws/lambda/{self.function_name}"}
    config["LoggingConfig"] = dict(default, **(getattr(self, "logging_config", None) or {}))
    return config


def _lambda_update_logging(self, config_updates):
    if "LoggingConfig" in config_updates:
        self.logging_config = config_updates["LoggingConfig"]
    return _lambda_update(self, config_updates)


LambdaFunction.__init__ = _lambda_keeping_logging
LambdaFunction.get_configuration = _lambda_logging
LambdaFunction.update_configuration = _lambda_update_logging
DynamoHandler.call_action = _dynamodb_one_at_a_time
S3Response._key_response = _s3_writes_one_at_a_time

if __name__ == "__main__":
    sys.exit(main())
