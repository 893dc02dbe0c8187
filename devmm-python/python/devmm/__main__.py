"""``python -m devmm`` and the ``devmm`` console script: the Rust CLI
itself (``info``, ``check``, ``bench``, ``replay``, ``plot``, ``snapshot``),
run inside the extension module."""

import sys

from ._devmm import _cli_main


def main() -> int:
    """Runs ``devmm`` with this process's arguments; returns its exit status."""
    return _cli_main(["devmm", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
