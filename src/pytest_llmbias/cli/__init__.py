"""The ``llmbias`` command: domains, the store, ``init``, ``serve``, ``generate-domain`` and releases,
without running pytest. The entry point is :func:`pytest_llmbias.cli.main.main`."""
