"""moto_server, with its DynamoDB calls applied one at a time (infra/local/emulators.sh runs it).

DynamoDB applies the writes to one item one at a time: a conditional write is atomic. moto
checks a condition and then writes the item in two steps, without a lock, and its server runs
each request in its own thread, so two concurrent conditional writes to one item can both pass.
The delivery ledger's tests (one claim granted among many at once) rely on the atomicity, so
this runs moto_server's main, with the same arguments, after wrapping the DynamoDB handler in
one lock. Every other service runs concurrently, as before.
"""

import sys
import threading

from moto.dynamodb.responses import DynamoHandler
from moto.server import main

_lock = threading.Lock()
_call_action = DynamoHandler.call_action


def _one_at_a_time(self):
    with _lock:
        return _call_action(self)


DynamoHandler.call_action = _one_at_a_time

if __name__ == "__main__":
    sys.exit(main())
