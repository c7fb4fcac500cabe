"""A small model on this machine behind an OpenAI-compatible endpoint, for a first gate with no API
key and for the tests that must meet a real model's answers: ``llmbias serve`` (extra ``local``;
see :mod:`pytest_llmbias.local.server`). Nothing here is imported by the plugin."""
