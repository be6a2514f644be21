"""Same as `minitrans average ...` (a thin wrapper; all logic lives in minitrans.cli)."""

import sys

from minitrans.cli import main

if __name__ == "__main__":
    main(["average", *sys.argv[1:]])
