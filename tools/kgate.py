#!/usr/bin/python3
"""Command-line entry point: /usr/bin/python3 tools/kgate.py --help."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kgate.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
