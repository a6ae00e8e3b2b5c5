"""Drives `mcp-broker stdio` with the official MCP Python SDK client.

argv[1] is a JSON object: {"command", "args", "env", "calls": [[tool, arguments], ...], "hold": bool}.
Prints one JSON line with the negotiated protocol, the tool names and each call's result. With
"hold", keeps the session open until a line arrives on stdin, so a test can look at the daemon
while several clients are connected.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    params = StdioServerParameters(command=cfg["command"], args=cfg["args"], env=cfg.get("env"))
    async with Client(params) as client:
        tools = await client.list_tools()
        out = {
            "protocol": client.protocol_version,
            "server": client.server_info.name if client.server_info else None,
            "tools": [t.name for t in tools.tools],
            "calls": [],
        }
        for name, arguments in cfg.get("calls", []):
            result = await client.call_tool(name, arguments)
            out["calls"].append(
                {
                    "name": name,
                    "is_error": bool(result.is_error),
                    "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content],
                }
            )
        print(json.dumps(out), flush=True)
        if cfg.get("hold"):
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


asyncio.run(main())
