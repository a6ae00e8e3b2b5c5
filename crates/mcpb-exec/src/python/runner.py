"""Runs one snippet of a code run as __main__ and turns an uncaught exception into a short
traceback on stderr and exit status 1."""

import runpy
import sys
import traceback

sys.path.insert(0, "/sdk")
sys.path.insert(1, "/work")
target = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    runpy.run_path(target, run_name="__main__")
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
