#!/usr/bin/python3
"""Command-line entry point: /usr/bin/python3 tools/kgate.py --help."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import jinja2  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    # A usage error (exit 2), as any other tool missing: never 1, the
    # code of a regression.
    print(f"kgate: error: {e.name} is missing for {sys.executable}: run 'make deps' "
          "(kgate runs with Debian's /usr/bin/python3, which has python3-yaml and "
          "python3-jinja2)", file=sys.stderr)
    sys.exit(2)

try:
    # A module that reads the checkout's data when imported (a file
    # that cannot be used) is a usage error, never a verdict.
    from kgate.cli import main
except Exception as e:  # noqa: BLE001
    from kgate.common import KgateError
    if isinstance(e, KgateError):
        print(f"kgate: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"kgate: internal error while loading: {type(e).__name__}: {e} (a bug of kgate)",
          file=sys.stderr)
    sys.exit(7)

if __name__ == "__main__":
    sys.exit(main())
