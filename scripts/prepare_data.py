"""Same as `minitrans prepare ...` (a thin wrapper; all logic lives in minitrans.cli)."""

import sys

from minitrans.cli import main

if __name__ == "__main__":
    main(["prepare", *sys.argv[1:]])
