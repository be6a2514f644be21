"""Same as `minitrans train ...` (a thin wrapper; all logic lives in minitrans.cli)."""

import sys

from minitrans.cli import main

if __name__ == "__main__":
    main(["train", *sys.argv[1:]])
