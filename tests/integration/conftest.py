"""Shared setup of the integration tests: pytester, for running pytest in a separate process."""

pytest_plugins = ["pytester"]
