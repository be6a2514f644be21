"""Same as `minitrans evaluate ...` (a thin wrapper; all logic lives in minitrans.cli)."""

import sys

from minitrans.cli import main

if __name__ == "__main__":
    main(["evaluate", *sys.argv[1:]])
