# SPDX-License-Identifier: MIT
"""``python3 -m topoplace place|frag|replace|defrag FILE``: see :mod:`topoplace.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
