"""``python -m pytest_llmbias``: the ``llmbias`` command."""

from pytest_llmbias.cli.command import main

raise SystemExit(main())
