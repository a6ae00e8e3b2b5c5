"""The broker as the client of a remote MCP server, for the conformance suite's client scenarios.

The suite runs `client.py <server-url>` with MCP_CONFORMANCE_SCENARIO set. This starts a broker
(MCPB_BIN, in a temporary runtime dir) with one streamable-HTTP upstream at that URL, in
transparent mode, and drives a session through the shim with the official Python SDK client:
list the tools and call each one. Elicitation requests are answered with the schema's defaults.
What the suite checks is what the broker sent upstream.

For the auth/* scenarios the broker first signs in: `mcp-broker auth login remote` prints the
authorization address, which this script opens as a browser would (following the redirect to
the broker's loopback listener); the client-credentials grant needs no sign-in. The scenario's
context (MCP_CONFORMANCE_CONTEXT) gives a registered client where there is one.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import ElicitResult

ARGS = {"add_numbers": {"a": 2, "b": 3}}


async def elicit(_context, params):
    schema = getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", {}) or {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    return ElicitResult(action="accept", content=content)


SECRET_VAR = "MCPB_CONFORMANCE_CLIENT_SECRET"


# The client metadata document URL the suite's authorization server knows this client by
# (SEP-991): servers that take one see it as the client id; the others get a registration.
# Nothing is fetched from it.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def oauth_block(scenario, ctx):
    """The upstream's oauth: settings: the scenario's registered client, if any."""
    if scenario.startswith("auth/client-credentials"):
        if "client_secret" not in ctx:
            return ""
        return (f", oauth: {{client_id: {json.dumps(ctx['client_id'])}, "
                f"client_secret: \"${{{SECRET_VAR}}}\", grant: client_credentials}}")
    if not scenario.startswith("auth/"):
        return ""
    fields = [f"client_metadata_url: {json.dumps(CLIENT_METADATA_URL)}"]
    if "client_id" in ctx:
        fields.append(f"client_id: {json.dumps(ctx['client_id'])}")
    if "client_secret" in ctx:
        fields.append(f"client_secret: \"${{{SECRET_VAR}}}\"")
    return f", oauth: {{{', '.join(fields)}}}"


def sign_in(bin_path, env):
    """`auth login`, with this script as the browser: open the address it prints."""
    login = subprocess.Popen([bin_path, "auth", "login", "remote", "--timeout-s", "20"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    address = login.stdout.readline().strip()
    if address:
        try:
            urllib.request.urlopen(address, timeout=10).read()
        except Exception as e:  # the scenario judges what the broker did
            print(f"browser: {e}", file=sys.stderr)
    _, err = login.communicate(timeout=30)
    print(err, file=sys.stderr, end="")


async def drive(bin_path, env):
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
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="mcpb-cc-", dir="/tmp") as home:
        config = os.path.join(home, "broker.yaml")
        with open(config, "w") as f:
            f.write(
                "schema_version: 1\n"
                f"upstreams:\n  remote: {{transport: streamable_http, url: {json.dumps(url)}{oauth_block(scenario, ctx)}}}\n"
                "profiles:\n  default: {upstreams: [remote], namespace: false, allow_mutating_upstreams: true}\n"
            )
        env = {"MCP_BROKER_HOME": home, "MCP_BROKER_CONFIG": config, "PATH": os.environ.get("PATH", "")}
        if "client_secret" in ctx:
            env[SECRET_VAR] = ctx["client_secret"]
        try:
            if scenario.startswith("auth/") and not scenario.startswith("auth/client-credentials"):
                sign_in(bin_path, env)
            asyncio.run(drive(bin_path, env))
        finally:
            subprocess.run([bin_path, "stop"], env=env, capture_output=True)
            # The daemon's log goes with the scenario's results, for when it fails.
            log = os.path.join(home, "logs", "daemon.log")
            if os.path.exists(log):
                with open(log) as f:
                    print(f.read()[-4000:], file=sys.stderr)


main()
