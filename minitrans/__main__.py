"""``python -m minitrans`` is the ``minitrans`` command."""

from minitrans.cli.parser import main

if __name__ == "__main__":
    main()
