"""The ``sentiment`` feature: TextBlob polarity. textblob is imported on the first extraction."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

from pytest_llmbias.errors import FeatureError
from pytest_llmbias.scoring.features.extractor import FeatureExtractor

__all__ = ["SentimentExtractor"]


def _textblob_version() -> str:
    try:
        return importlib.metadata.version("textblob")
    except importlib.metadata.PackageNotFoundError as exc:
        raise FeatureError(
            "the sentiment feature needs TextBlob, which is not installed. Install it with: pip install textblob"
        ) from exc


class SentimentExtractor(FeatureExtractor):
    """TextBlob polarity in [-1, 1] (its default ``PatternAnalyzer``: works offline, no NLTK data).

    Identity: ``textblob-polarity:<version>:textblob==<installed version>``. textblob is imported
    on the first :meth:`extract`; a missing textblob is a :class:`FeatureError` naming the pip
    package.
    """

    name = "sentiment"

    def __init__(self) -> None:
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        if self._identity is None:
            self._identity = f"textblob-polarity:{self.version}:textblob=={_textblob_version()}"
        return self._identity

    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> list[float]:
        try:
            from textblob import TextBlob
        except ImportError as exc:
            raise FeatureError(
                f"the sentiment feature needs TextBlob ({exc}). Install it with: pip install textblob"
            ) from exc
        return [float(TextBlob(text).sentiment.polarity) for text in texts]
