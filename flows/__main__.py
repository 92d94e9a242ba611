"""``python -m juryflow``: the command line."""

from juryflow.cli import main

main()
