"""The SDK of a code run: call the broker's tools from a snippet.

    from mcp_sdk import call_tool, ToolError, save_artifact, result

Every call travels as one JSON line over the channel the broker opened for this run (fd 3);
the broker applies the run's allow list, the profile's policy and the run's limits.
"""

import base64
import json
import os
import socket
import threading

__all__ = ["call_tool", "ToolError", "save_artifact", "result"]


class ToolError(Exception):
    """A tool answered with an error, or the broker refused the call (unknown tool, outside
    the run's allow list, a mutating tool in a read-only run, a limit)."""

    def __init__(self, message, kind="tool"):
        super().__init__(message)
        self.kind = kind


class _Channel:
    def __init__(self, fd):
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(True)
        self._file = self._sock.makefile("rb")
        self._lock = threading.Lock()
        self._next = 0
        self._waiting = {}
        self._reader = None
        self._closed = None

    def request(self, method, params):
        waiter = [threading.Event(), None]
        line = None
        with self._lock:
            if self._closed is not None:
                raise ToolError(self._closed, "channel")
            self._next += 1
            rid = self._next
            self._waiting[rid] = waiter
            line = json.dumps({"id": rid, "method": method, "params": params}) + "\n"
            try:
                self._sock.sendall(line.encode("utf-8"))
            except OSError as e:
                del self._waiting[rid]
                raise ToolError(f"the broker channel is closed: {e}", "channel")
            if self._reader is None:
                self._reader = threading.Thread(target=self._read, daemon=True)
                self._reader.start()
        waiter[0].wait()
        answer = waiter[1]
        if "error" in answer:
            err = answer["error"] or {}
            raise ToolError(err.get("message", "error"), err.get("kind", "tool"))
        return answer.get("result")

    def _read(self):
        reason = "the broker channel closed"
        try:
            for raw in self._file:
                try:
                    answer = json.loads(raw)
                except ValueError:
                    continue
                rid = answer.get("id")
                with self._lock:
                    if rid is None:
                        # An error the broker could not tie to a request: fail them all.
                        waiters, self._waiting = list(self._waiting.values()), {}
                    else:
                        waiter = self._waiting.pop(rid, None)
                        waiters = [] if waiter is None else [waiter]
                for waiter in waiters:
                    waiter[1] = answer
                    waiter[0].set()
        except OSError as e:
            reason = f"the broker channel failed: {e}"
        with self._lock:
            self._closed = reason
            waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter[1] = {"error": {"message": reason, "kind": "channel"}}
            waiter[0].set()


_channel = _Channel(int(os.environ.get("MCP_SDK_FD", "3")))


def call_tool(name, arguments=None):
    """Calls a tool by its exposed name (e.g. "example.echo"). Returns its structured result
    when it has one, else its text parsed as JSON when it is JSON, else the text. Raises
    ToolError with the tool's or the broker's message."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict")
    return _channel.request("call_tool", {"name": name, "arguments": arguments})


def save_artifact(name, data):
    """Stores `data` (str or bytes) as an artifact of the run; returns its id, readable with
    the broker's get_artifact tool. The run's answer lists it."""
    if isinstance(data, str):
        params = {"name": str(name), "text": data}
    elif isinstance(data, (bytes, bytearray, memoryview)):
        params = {"name": str(name), "base64": base64.b64encode(bytes(data)).decode("ascii")}
    else:
        raise TypeError("data must be str or bytes")
    return _channel.request("save_artifact", params)["id"]


def result(value):
    """Sets the run's result: any JSON-serialisable value. The last call wins."""
    json.dumps(value)
    _channel.request("result", {"value": value})
