"""``python -m pytest_llmbias``: the ``llmbias`` command."""

from pytest_llmbias.cli.main import main

raise SystemExit(main())
