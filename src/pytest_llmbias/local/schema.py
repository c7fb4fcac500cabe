"""Constrained decoding under a JSON schema, for the local model server
(:mod:`pytest_llmbias.local.server`): the schema's punctuation and keys are forced, an integer takes
only digit tokens within its bounds, a string only tokens without quotes, backslashes or control
characters (an ``enum`` only tokens that spell one of its options), so an answer decoded under it
always parses."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class _Piece:
    kind: str  # "literal" | "integer" | "string" | "enum" (a string, one of ``options``)
    text: str = ""
    low: int | None = None
    high: int | None = None
    options: tuple[str, ...] = ()


def schema_pieces(schema: dict[str, Any]) -> list[_Piece]:
    """The schema as a sequence of forced literals and free values; ValueError for a schema this
    decoder does not handle (only flat objects of integer and string properties, a string's
    ``enum`` of plain strings included)."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise ValueError("only object schemas are supported")
    pieces: list[_Piece] = []
    text = "{"
    for i, (name, prop) in enumerate(schema["properties"].items()):
        text += ("" if i == 0 else ", ") + json.dumps(name) + ": "
        kind = prop.get("type")
        if kind == "integer":
            pieces += [_Piece("literal", text), _Piece("integer", low=prop.get("minimum"), high=prop.get("maximum"))]
            text = ""
        elif kind == "string" and "enum" in prop:
            options = prop["enum"]
            if not options or not all(isinstance(o, str) and o and '"' not in o and "\\" not in o for o in options):
                raise ValueError("an enum must list plain, non-empty strings")
            pieces += [_Piece("literal", text + '"'), _Piece("enum", options=tuple(options))]
            text = '"'
        elif kind == "string":
            pieces += [_Piece("literal", text + '"'), _Piece("string")]
            text = '"'
        else:
            raise ValueError(f"property type {kind!r} is not supported")
    pieces.append(_Piece("literal", text + "}"))
    return pieces


class Vocabulary:
    """Each token's text, and which tokens may stand in an integer or inside a JSON string."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        size = len(tokenizer)
        special = set(tokenizer.all_special_ids)
        self.texts = [tokenizer.decode([i]) if i not in special else "" for i in range(size)]
        self.digits = [i for i, t in enumerate(self.texts) if t and t.isascii() and t.isdigit()]
        self.digit_set = frozenset(self.digits)
        self.string_ok = [
            i
            for i, t in enumerate(self.texts)
            if t and '"' not in t and "\\" not in t and all(c.isprintable() for c in t)
        ]

        self._string_allowed: dict[tuple[int, ...], Any] = {}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def string_allowed(self, end: Sequence[int]) -> Any:
        """The tokens a JSON string may take next (its safe tokens and ``end``, the closing quote),
        as an index tensor built once per ``end``: the list is as long as the vocabulary, and a
        string takes a token at every step."""
        key = tuple(end)
        if key not in self._string_allowed:
            import torch

            self._string_allowed[key] = torch.tensor(self.string_ok + list(key), dtype=torch.long)
        return self._string_allowed[key]


class SchemaDecoder:
    """One row's progress through :func:`schema_pieces`: which tokens it may take next."""

    def __init__(self, vocab: Vocabulary, schema: dict[str, Any], budget: int, max_string: int = 32) -> None:
        self.vocab = vocab
        self.max_string = max_string
        self.string_tokens = 0
        self.pieces = schema_pieces(schema)
        self.index = 0
        self.forced: list[int] = vocab.encode(self.pieces[0].text)
        self.value = ""
        self.budget = budget  # tokens left for the whole answer
        self.closing = sum(len(vocab.encode(p.text)) for p in self.pieces if p.kind == "literal")

    @property
    def done(self) -> bool:
        return self.index >= len(self.pieces)

    def _next_literal(self) -> list[int]:
        nxt = self.pieces[self.index + 1] if self.index + 1 < len(self.pieces) else None
        return self.vocab.encode(nxt.text) if nxt is not None else []

    def choices(self) -> tuple[int | None, Any]:
        """(a forced token, or None) and (the allowed tokens, a list or an index tensor, or None for any)."""
        if self.forced:
            return self.forced[0], None
        piece = self.pieces[self.index]
        end = self._next_literal()[:1]
        if piece.kind == "integer":
            allowed = [i for i in self.vocab.digits if self._integer_prefix(self.value + self.vocab.texts[i])]
            if self.value and self._integer_complete(self.value):
                allowed += end
            return (end[0] if not allowed and end else None), allowed
        if piece.kind == "enum":  # a token that continues one of the options, or the closing quote after one
            texts = self.vocab.texts
            allowed = [
                i for i in self.vocab.string_ok if any(o.startswith(self.value + texts[i]) for o in piece.options)
            ]
            if self.value in piece.options:
                allowed += end
            return (end[0] if not allowed and end else None), allowed
        # a string: any safe token, or the closing quote; closed early when the budget runs out
        # or the string reaches max_string tokens (a small model seldom closes one itself)
        if self.budget <= self.closing + 2 or self.string_tokens >= self.max_string:
            return end[0], None
        return None, self.vocab.string_allowed(end)

    def _integer_prefix(self, text: str) -> bool:
        """Whether some integer within the bounds starts with ``text``."""
        p = self.pieces[self.index]
        if len(text) > 1 and text[0] == "0":
            return False
        if p.low is not None and p.high is not None and p.high - p.low <= 10_000:
            return any(str(v).startswith(text) for v in range(p.low, p.high + 1))
        return p.high is None or int(text) <= p.high

    def _integer_complete(self, text: str) -> bool:
        p = self.pieces[self.index]
        return (p.low is None or int(text) >= p.low) and (p.high is None or int(text) <= p.high)

    def take(self, token: int) -> None:
        self.budget -= 1
        if self.forced:
            self.forced.pop(0)
            if not self.forced:
                self.index += 1
            return
        kind, nxt = self.pieces[self.index].kind, self._next_literal()
        if (kind == "integer" and token in self.vocab.digit_set) or (
            kind in ("string", "enum") and token != nxt[:1][0]
        ):
            self.value += self.vocab.texts[token]
            self.string_tokens += kind != "integer"
            return
        # the value has ended: the literal after it has begun with this token
        self.index += 1
        self.forced, self.value, self.string_tokens = nxt[1:], "", 0
        if not self.forced:
            self.index += 1
