"""The client of a recorded release: its answers come from the record, and a call it lacks fails
at once, never reaching a model (see :mod:`pytest_llmbias.releases.release`)."""

from __future__ import annotations

from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.store.calls import ModelCall, Response


class RecordedClient:
    """Answers nothing: every call that reaches it is one the release's record lacks."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    async def complete(self, call: ModelCall) -> Response:
        raise ProviderError(
            f"release {self.spec.alias!r} has no recorded answer to {call.prompt_excerpt!r} (sample {call.sample}) "
            f"in {self.spec.recorded}: a release is never asked again; record it with the questions this run asks"
        )
