"""Runs one snippet of a code run as __main__ and turns an uncaught exception into a short
traceback on stderr and exit status 1.

The interpreter starts before its run is known: it loads the SDK, then waits on the SDK
channel (fd 3) for its job, `<length>\\n<JSON>` with the snippet's code or the workspace file
to run. The broker sends it only once the run's workspace is in /work."""

import builtins
import io
import linecache
import os
import runpy
import sys
import traceback
import types

sys.path.insert(0, "/sdk")

import mcp_sdk  # noqa: E402  (loaded before the job: that is the point of starting early)
import json  # noqa: E402

SNIPPET = "/sdk/main.py"


def _read_exactly(n):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(3, n - len(data))
        if not chunk:
            # The broker let this interpreter go without a run.
            os._exit(0)
        data += chunk
    return bytes(data)


def _job():
    head = bytearray()
    while not head.endswith(b"\n"):
        head += _read_exactly(1)
        if len(head) > 12:
            os._exit(2)
    return json.loads(_read_exactly(int(head)))


def _run(job):
    # Only now: the workspace is in place, and what the SDK imported came from the standard
    # library whatever files the workspace holds.
    sys.path.insert(1, "/work")
    entry = job.get("entry")
    if entry:
        sys.argv = [entry]
        runpy.run_path(entry, run_name="__main__")
        return
    code = job.get("code") or ""
    if code.startswith("\ufeff"):
        code = code[1:]
    # The snippet is no file in the jail: its text goes where tracebacks look for lines.
    # Split where Python's tokenizer ends lines (\n, \r\n, \r), not where str.splitlines does.
    lines = io.StringIO(code, newline="").readlines()
    linecache.cache[SNIPPET] = (len(code), None, lines, SNIPPET)
    # Keep the runner's own module alive once __main__ names the snippet's.
    _run.runner = sys.modules["__main__"]
    main = types.ModuleType("__main__")
    main.__file__ = SNIPPET
    main.__builtins__ = builtins
    main.__package__ = ""
    main.__cached__ = None
    sys.modules["__main__"] = main
    sys.argv = [SNIPPET]
    exec(compile(code, SNIPPET, "exec"), main.__dict__)


job = _job()
try:
    _run(job)
except SystemExit:
    raise
except BaseException:
    kind, value, tb = sys.exc_info()
    # Frames of this runner and of runpy tell the snippet's author nothing.
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
        tb = tb.tb_next
    traceback.print_exception(kind, value, tb)
    sys.exit(1)
finally:
    sys.stdout.flush()
    sys.stderr.flush()
