"""Resources, prompts and completion through `mcp-broker stdio` with the official MCP Python SDK
client: list and read resources (one listed, one from a template), list and get prompts,
complete a prompt argument, and ask for a prompt of no upstream of the profile.

argv[1] is a JSON object: {"command", "args", "env" | "url", "token", "prefix"}. Prints one JSON line.
"""

import asyncio
import json
import sys

from mcp import Client
from _broker import server as _server
from mcp.types import PromptReference


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    pre = cfg["prefix"]
    params = _server(cfg)
    out = {}
    async with Client(params, mode=cfg.get("mode", "auto")) as client:
        caps = getattr(client.session, "server_capabilities", None)
        out["caps"] = caps.model_dump(exclude_none=True) if caps is not None else None
        resources = await client.list_resources()
        out["resources"] = [str(r.uri) for r in resources.resources]
        first = resources.resources[0]
        read = await client.read_resource(first.uri)
        out["read"] = [c.model_dump(mode="json", exclude_none=True) for c in read.contents]
        templates = await client.list_resource_templates()
        out["templates"] = [t.uri_template for t in templates.resource_templates]
        dynamic = await client.read_resource("demo://resource/dynamic/text/7")
        out["dynamic"] = [c.model_dump(mode="json", exclude_none=True) for c in dynamic.contents]
        prompts = await client.list_prompts()
        out["prompts"] = [p.name for p in prompts.prompts]
        got = await client.get_prompt(pre + "args-prompt", {"city": "Lyon", "state": "Rhone"})
        out["prompt"] = [m.model_dump(mode="json", exclude_none=True) for m in got.messages]
        done = await client.complete(PromptReference(type="ref/prompt", name=pre + "completable-prompt"), {"name": "department", "value": "E"})
        out["completion"] = done.completion.values
        try:
            await client.get_prompt("nowhere.args-prompt", {})
            out["hidden"] = "ANSWERED"
        except Exception as e:  # the SDK raises McpError
            out["hidden"] = str(e)
        try:
            await client.read_resource("nowhere://x")
            out["unknown_resource"] = "ANSWERED"
        except Exception as e:
            out["unknown_resource"] = str(e)
    print(json.dumps(out), flush=True)


asyncio.run(main())
