"""``python -m pte_lab.cli``: the command line, as the ``pte-lab`` script runs it."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
