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
from mcp.client.stdio import StdioServerParameters


def _server(cfg):
    """The shim over stdio, or the broker's HTTP front when the spec has a url and a token."""
    if "url" in cfg:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers={"Authorization": "Bearer " + cfg["token"]})
        return streamable_http_client(cfg["url"], http_client=http)
    return StdioServerParameters(command=cfg["command"], args=cfg["args"], env=cfg.get("env"))


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
