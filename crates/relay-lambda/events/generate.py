#!/usr/bin/env python3
"""Builds the Function URL (payload format 2.0) example events from the signed DSS captures.

Run from the repository root: python3 crates/relay-lambda/events/generate.py
The captures are signed with the key "ribos0me" on Fri, 15 Nov 2019 20:24:11 GMT, so a relay
replaying them needs RELAY_HMAC_SECRET=ribos0me and RELAY_MAX_CLOCK_SKEW_SECS=0.
"""
import base64
import json
import pathlib

CAPTURES = pathlib.Path("crates/relay-core/tests/data/dss")
OUT = pathlib.Path("crates/relay-lambda/events")


def parse(raw: bytes):
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("ascii").split("\r\n")
    method, target, _ = lines[0].split(" ")
    headers = {}
    for line in lines[1:]:
        name, value = line.split(": ", 1)
        headers[name.lower()] = value
    return method, target, headers, body


def event(raw: bytes, tamper=None):
    method, target, headers, body = parse(raw)
    if tamper:
        headers = tamper(headers)
    path, _, query = target.partition("?")
    headers["host"] = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws"
    headers["x-forwarded-proto"] = "https"
    text = headers.get("content-type", "").startswith("application/json")
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": dict(p.split("=", 1) for p in query.split("&")) if query else None,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefghijklmnopqrstuvwxyz012345",
            "domainName": headers["host"],
            "domainPrefix": "abcdefghijklmnopqrstuvwxyz012345",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": "6d5c8a52-57a3-4b1e-9c52-4f6e8d0f1a2b",
            "routeKey": "$default",
            "stage": "$default",
            "time": "15/Nov/2019:20:24:11 +0000",
            "timeEpoch": 1573849451000,
        },
        "body": body.decode("utf-8") if text else base64.b64encode(body).decode("ascii"),
        "isBase64Encoded": not text,
    }


def bad_signature(headers):
    headers = dict(headers)
    headers["authorization"] = headers["authorization"].replace('signature="P', 'signature="Q')
    return headers


def main():
    read = lambda name: (CAPTURES / name).read_bytes()
    events = {
        "dss-v2-create.json": event(read("v2-json-post.http")),
        "dss-v1-create.json": event(read("v1-json-post-custom-keyid.http")),
        "dss-v2-multipart-put.json": event(read("v2-multipart-put.http")),
        "dss-bad-signature.json": event(read("v2-json-post.http"), bad_signature),
    }
    for name, body in events.items():
        (OUT / name).write_text(json.dumps(body, indent=2) + "\n")
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
