"""``python -m minitrans`` is the ``minitrans`` command."""

from minitrans.cli import main

if __name__ == "__main__":
    main()
