"""Lets the examples run from a checkout where `worq` is not installed: falls back to the
in-repo sources (clients/python/src and gen/python/src, one pkgutil namespace)."""

import os
import sys

try:
    import worq  # noqa: F401
    import worq.v1  # noqa: F401
except ImportError:
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    sys.path[:0] = [os.path.join(root, "clients", "python", "src"), os.path.join(root, "gen", "python", "src")]
    for name in [m for m in sys.modules if m == "worq" or m.startswith("worq.")]:
        del sys.modules[name]
