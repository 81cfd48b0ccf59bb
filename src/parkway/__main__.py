"""``python -m parkway``: the same as the ``parkway`` command."""

from parkway.cli import main

if __name__ == "__main__":
    main()
