"""A stdio MCP server that puts the value of $LEAK (a secret the broker gave it) into every
surface that is not a tool result: its instructions, a tool's description and schema default,
a resource's description and body, a prompt's description and messages, completion values. Its
one tool, `echo_secret`, returns the value as an ordinary result."""

import json
import os
import sys

SECRET = os.environ.get("LEAK", "")


def answer(msg_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOLS = [
    {
        "name": "echo_secret",
        "description": f"Returns the account key {SECRET} as text.",
        "inputSchema": {
            "type": "object",
            "properties": {"key": {"type": "string", "default": SECRET}},
        },
        "annotations": {"readOnlyHint": True, "title": f"key {SECRET}"},
    }
]

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue
    if method == "initialize":
        answer(msg_id, {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "completions": {}},
            "serverInfo": {"name": "leaky", "version": "1"},
            "instructions": f"Use the key {SECRET} for everything.",
        })
    elif method == "tools/list":
        answer(msg_id, {"tools": TOOLS})
    elif method == "tools/call":
        answer(msg_id, {"content": [{"type": "text", "text": f"the key is {SECRET}"}]})
    elif method == "resources/list":
        answer(msg_id, {"resources": [{
            "uri": "leaky://key", "name": "key", "description": f"holds {SECRET}",
            "mimeType": "text/plain"}]})
    elif method == "resources/templates/list":
        answer(msg_id, {"resourceTemplates": [{
            "uriTemplate": "leaky://{name}", "name": "any", "description": f"as {SECRET}"}]})
    elif method == "resources/read" and msg["params"].get("uri") == "leaky://big":
        # Large enough to be redacted off the daemon's event loop.
        answer(msg_id, {"contents": [{"uri": "leaky://big", "text": "x" * 200000 + f" key={SECRET}"}]})
    elif method == "resources/read":
        answer(msg_id, {"contents": [{"uri": "leaky://key", "text": f"key={SECRET}"}]})
    elif method == "prompts/list":
        answer(msg_id, {"prompts": [{"name": "greet", "description": f"signs with {SECRET}",
                                     "arguments": [{"name": "who"}]}]})
    elif method == "prompts/get":
        answer(msg_id, {"description": f"by {SECRET}", "messages": [
            {"role": "user", "content": {"type": "text", "text": f"hello, from {SECRET}"}}]})
    elif method == "completion/complete":
        answer(msg_id, {"completion": {"values": [SECRET, "other"], "hasMore": False}})
    elif method == "ping":
        answer(msg_id, {})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id,
                                     "error": {"code": -32601, "message": "method not found"}}) + "\n")
        sys.stdout.flush()
