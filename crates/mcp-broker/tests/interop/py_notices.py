"""Resource subscriptions and log messages through `mcp-broker stdio` with the official MCP Python
SDK client: subscribe to a resource of server-everything, turn on its simulated updates and
logging (its own tools), and wait for a `notifications/resources/updated` and a
`notifications/message`.

argv[1] is a JSON object: {"command", "args", "env" | "url", "token", "prefix", "uri"}. Prints one JSON line.
"""

import asyncio
import json
import sys

from mcp import Client
from _broker import server as _server


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    pre = cfg["prefix"]
    params = _server(cfg)
    updated = asyncio.Event()
    logged = asyncio.Event()
    out = {"updated": [], "logs": []}

    async def on_message(message):
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/resources/updated":
            out["updated"].append(str(root.params.uri))
            updated.set()

    async def on_log(params):
        out["logs"].append({"level": params.level, "logger": params.logger})
        logged.set()

    mode = cfg.get("mode", "auto")
    async with Client(params, mode=mode, message_handler=on_message, logging_callback=on_log) as client:
        await client.subscribe_resource(cfg["uri"])
        await client.set_logging_level("debug")
        await client.call_tool(pre + "toggle-subscriber-updates", {})
        await client.call_tool(pre + "toggle-simulated-logging", {})
        try:
            await asyncio.wait_for(asyncio.gather(updated.wait(), logged.wait()), 15)
        except asyncio.TimeoutError:
            out["timeout"] = True
        await client.unsubscribe_resource(cfg["uri"])
    print(json.dumps(out), flush=True)


asyncio.run(main())
