"""The broker as the client of a remote MCP server, for the conformance suite's client scenarios.

The suite runs `client.py <server-url>` with MCP_CONFORMANCE_SCENARIO set. This starts a broker
(MCPB_BIN, in a temporary runtime dir) with one streamable-HTTP upstream at that URL, in
transparent mode, and drives a session through the shim with the official Python SDK client:
list the tools and call each one. Elicitation requests are answered with the schema's defaults.
What the suite checks is what the broker sent upstream.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import ElicitResult

ARGS = {"add_numbers": {"a": 2, "b": 3}}


async def elicit(_context, params):
    schema = getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", {}) or {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    return ElicitResult(action="accept", content=content)


async def drive(bin_path, home, config):
    env = {"MCP_BROKER_HOME": home, "MCP_BROKER_CONFIG": config, "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=bin_path, args=["stdio"], env=env)
    async with Client(params, mode="legacy", elicitation_callback=elicit) as client:
        tools = await client.list_tools()
        for tool in tools.tools:
            try:
                await client.call_tool(tool.name, ARGS.get(tool.name, {}))
            except Exception as e:  # a failing tool is the scenario's to judge
                print(f"{tool.name}: {e}", file=sys.stderr)


def main():
    url = sys.argv[1]
    bin_path = os.environ["MCPB_BIN"]
    with tempfile.TemporaryDirectory(prefix="mcpb-cc-", dir="/tmp") as home:
        config = os.path.join(home, "broker.yaml")
        with open(config, "w") as f:
            f.write(
                "schema_version: 1\n"
                f"upstreams:\n  remote: {{transport: streamable_http, url: {json.dumps(url)}}}\n"
                "profiles:\n  default: {upstreams: [remote], namespace: false, allow_mutating_upstreams: true}\n"
            )
        try:
            asyncio.run(drive(bin_path, home, config))
        finally:
            subprocess.run([bin_path, "stop"], env={**os.environ, "MCP_BROKER_HOME": home, "MCP_BROKER_CONFIG": config},
                           capture_output=True)


main()
