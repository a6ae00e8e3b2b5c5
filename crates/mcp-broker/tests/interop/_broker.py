"""What the driver scripts share: how to reach the broker, and a tool result's JSON."""

import json

from mcp.client.stdio import StdioServerParameters


def server(cfg):
    """The shim over stdio, or the broker's HTTP front when the spec has a url and a token."""
    if "url" in cfg:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers={"Authorization": "Bearer " + cfg["token"]})
        return streamable_http_client(cfg["url"], http_client=http)
    return StdioServerParameters(command=cfg["command"], args=cfg["args"], env=cfg.get("env"))


def data(result):
    """A broker tool's answer: the JSON in its text content."""
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return json.loads(text)
