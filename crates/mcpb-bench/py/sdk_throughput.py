"""Calls per second through the official MCP Python SDK client, `concurrency` calls in flight:
the example server spoken to directly against the same server behind `mcp-broker stdio`.

argv[1] is a JSON object: {"direct": {"command", "args", "env"}, "broker": {...}, "tool_direct",
"tool_broker", "concurrency", "calls", "rounds"}. Rounds alternate direct and broker, each with a
new client; the client's start is not timed. Prints one JSON line: {"direct": [calls/s ...],
"broker": [calls/s ...]}.
"""

import asyncio
import json
import sys
import time

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def rate(side, tool, calls, concurrency):
    params = StdioServerParameters(command=side["command"], args=side["args"], env=side.get("env"))
    async with Client(params) as client:
        for _ in range(50):
            await client.call_tool(tool, {"message": "x"})
        gate = asyncio.Semaphore(concurrency)

        async def one():
            async with gate:
                r = await client.call_tool(tool, {"message": "x"})
                if r.is_error:
                    raise RuntimeError(f"{tool} answered an error")

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        return calls / (time.perf_counter() - start)


async def main():
    cfg = json.loads(sys.argv[1])
    out = {"direct": [], "broker": []}
    for _ in range(cfg["rounds"]):
        for name in ("direct", "broker"):
            tool = cfg["tool_" + name]
            out[name].append(await rate(cfg[name], tool, cfg["calls"], cfg["concurrency"]))
    print(json.dumps(out), flush=True)


asyncio.run(main())
