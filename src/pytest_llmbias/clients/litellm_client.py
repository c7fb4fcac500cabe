"""Model calls: async, timed, retried by us, over one of four wires.

:class:`ModelClient` owns everything but the wire: the rate and concurrency limits, retries and
Retry-After, the budget, usage and latency, and error messages with credentials masked. The wire is
litellm (every provider; litellm's own retries are off) or, for OpenAI-compatible endpoints, the
direct transport of :mod:`pytest_llmbias.clients.openai_transport` (see ``resolve_transport``);
for an application, its Python callable (:mod:`pytest_llmbias.clients.python_target`) or its own
HTTP API (:mod:`pytest_llmbias.clients.http_target`).

litellm is imported on first use only, and only by a model that takes it (it takes seconds to
import, and without ``LITELLM_LOCAL_MODEL_COST_MAP`` it fetches a price list from the internet at
import time).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pytest_llmbias.choices import Transport
from pytest_llmbias.clients.faults import OVERLOAD_KINDS, FaultKind, FaultLog, fault_kind
from pytest_llmbias.clients.http_target import check_headers, complete_http
from pytest_llmbias.clients.litellm_import import import_litellm
from pytest_llmbias.clients.openai_transport import Completion, OpenAITransport, resolve_transport
from pytest_llmbias.clients.pricing import Budget
from pytest_llmbias.clients.python_target import PythonTarget
from pytest_llmbias.clients.ratelimit import AdaptiveLimit, RateLimiter, TokenLimiter
from pytest_llmbias.clients.retry import RetryPolicy, parse_retry_after, retryable_status
from pytest_llmbias.config.redaction import Redactor, merge_credentials, strip_userinfo
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.errors import ConfigError, ProviderError
from pytest_llmbias.store.calls import ModelCall, Response, construct
from pytest_llmbias.store.kept import IdentityCache

#: statuses that say "slow down": they halve the endpoint's adaptive limit and are retried on
#: their own budget (RetryPolicy.throttle_retries)
THROTTLE_STATUSES = frozenset({429, 503})

_MISSING_CREDENTIALS = "Missing credentials"


def classify(exc: BaseException, *, unknown_retryable: bool = True) -> tuple[bool, int | None, float | None]:
    """(retryable, HTTP status, Retry-After seconds) for an exception from a completion call.

    Rate limits, timeouts, server errors, dropped connections and malformed bodies are retryable;
    bad requests, authentication and unknown models are not. An exception with no HTTP status
    is retryable as ``unknown_retryable`` says (from a Python target's own code, a bug: not).
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None) if response is not None else None
        if not isinstance(status, int):
            status = None
    retry_after = parse_retry_after(_header(exc, "retry-after"))
    if _MISSING_CREDENTIALS in str(exc):
        # The SDK refused before sending anything; litellm reports it as a 500.
        return False, 401, None
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True, status, retry_after
    if status is None:
        return unknown_retryable, None, retry_after
    return retryable_status(status), status, retry_after


def _header(exc: BaseException, name: str) -> str | None:
    for holder in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    ):
        if holder is None:
            continue
        try:
            value = holder.get(name) or holder.get(name.title())
        except Exception:
            continue
        if value is not None:
            return str(value)
    return None


CompletionFn = Callable[..., Awaitable[Any]]


class ModelClient:
    """Calls one model. ``complete`` returns a :class:`Response` or raises :class:`ProviderError`.

    Every attempt passes the model's explicit caps (``limiter``: rpm; ``tokens``: tpm) and takes a
    place in its endpoint's :class:`AdaptiveLimit` (``adaptive``), which a 429 or 503, a timeout or
    a connection error halves and successes grow back. Waits between attempts follow the
    :class:`RetryPolicy` and never undercut a Retry-After; throttled attempts are retried on their
    own budget; an attempt that timed out keeps its place for one more timeout before its retry.
    Every failed attempt is counted by kind in ``faults`` (the first of a kind is told at once).
    The API key is read from the environment at each call. A final error carries our own message,
    with every credential ``redact`` knows (by default this model's) masked, and no chained
    provider exception: a traceback printed with its frames' locals must not show the key.
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        timeout: float,
        policy: RetryPolicy,
        limiter: RateLimiter | None = None,
        completion: CompletionFn | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        redact: Redactor | None = None,
        budget: Budget | None = None,
        direct: OpenAITransport | None = None,
        adaptive: AdaptiveLimit | None = None,
        tokens: TokenLimiter | None = None,
        registry: Mapping[str, Callable[..., Any]] | None = None,
        faults: FaultLog | None = None,
    ) -> None:
        self.adaptive = adaptive
        self.faults = faults
        self.tokens = tokens
        self.spec = spec
        #: the wire this model's calls take (``completion=`` replaces litellm's for tests); None
        #: for an application, whose entry says its wire
        self.transport: Transport | None = (
            None
            if spec.is_app
            else Transport.LITELLM
            if completion is not None
            else resolve_transport(spec.model, spec.api_base, spec.transport)
        )
        self._python = PythonTarget(spec, registry) if spec.python is not None else None
        self._owns_direct = direct is None
        self._direct = direct if direct is not None else OpenAITransport()
        self.budget = budget
        self.redact = redact or Redactor.for_models([spec])
        self.timeout = timeout
        self.policy = policy
        self.limiter = limiter or RateLimiter(0)
        self._completion = completion
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.attempts = 0
        self._credentials_checked = False
        self._merged: IdentityCache[Mapping[str, Any]] = IdentityCache(256)  # by (id(params), id(credentials))

    async def complete(self, call: ModelCall) -> Response:
        if not self._credentials_checked:  # a missing key is a configuration error: fail now, not after retries
            if self.spec.http is not None:
                check_headers(self.spec.http, self.spec.alias)
            elif self._python is not None:
                self._python.fn  # noqa: B018 - an entry that names no callable fails now, not after retries
            elif self._completion is None:
                check_credentials(self.spec, direct=self.transport is Transport.OPENAI)
            else:
                self.spec.api_key()
            self._credentials_checked = True
        if self._completion is None and self.transport is Transport.LITELLM:
            # Imported before the first attempt takes its turn at the rate limiter: the import
            # blocks the event loop for seconds, and the turns of the calls behind it would bunch.
            import_litellm()
        attempt = throttles = 0
        while True:
            if self.budget is not None:
                self.budget.check(self.spec.alias)  # a spent budget starts no call, not even a retry
            await self.limiter.acquire()
            if self.tokens is not None:
                await self.tokens.acquire()
            epoch = await self.adaptive.acquire() if self.adaptive is not None else 0
            self.attempts += 1
            started = time.perf_counter()
            try:
                raw = await self._call(call)
                response = self._to_response(call, raw, time.perf_counter() - started)
            except asyncio.CancelledError:
                if self.adaptive is not None:
                    self.adaptive.release(epoch)
                raise
            except Exception as exc:
                retryable, status, retry_after = (
                    (exc.retryable, exc.status, exc.retry_after)
                    if isinstance(exc, ProviderError)
                    else classify(exc, unknown_retryable=self._python is None)
                )
                kind = fault_kind(exc, status)
                throttled = status in THROTTLE_STATUSES
                if self.adaptive is not None and (throttled or kind in OVERLOAD_KINDS):
                    self.adaptive.overloaded(epoch, "throttled" if throttled else kind.value)
                if throttled:
                    self.limiter.throttled(retry_after)
                again = (
                    self.policy.should_retry_throttled(throttles, retry_after=retry_after)
                    if throttled
                    else self.policy.should_retry(attempt, retryable=retryable, retry_after=retry_after)
                )
                self._record(kind, exc, call, retried=again)
                if throttled and again:
                    try:
                        # the place is held through the wait: turned-away calls do not come
                        # straight back while the provider's window is still full
                        await self._sleep(self.policy.throttle_delay(throttles, retry_after, self._rng))
                    finally:
                        if self.adaptive is not None:
                            self.adaptive.release(epoch)
                    throttles += 1
                    continue
                stalled = again and kind is FaultKind.TIMEOUT and status != 504  # 504: a gateway's own timeout
                if self.adaptive is not None and not stalled:
                    self.adaptive.release(epoch)
                if not again:
                    error = self._final_error(exc, status, retryable, attempt + throttles, retry_after, kind)
                    del exc  # the provider's exception (and its frames' locals) go no further
                    raise error from None
                delay = self.policy.delay(attempt, retry_after, self._rng)
                if stalled:
                    # Our own timeout: the server may still be decoding the attempt we gave up on.
                    # Its place is kept, and its retry waits, one more timeout: the retry does not
                    # queue behind its own predecessor, and the endpoint's in-flight count says so.
                    try:
                        await self._sleep(max(delay, self.timeout))
                    finally:
                        if self.adaptive is not None:
                            self.adaptive.release(epoch)
                else:
                    await self._sleep(delay)
                attempt += 1
                continue
            if self.adaptive is not None:
                self.adaptive.release(epoch, ok=True)
            if self.tokens is not None:
                self.tokens.spend((response.prompt_tokens or 0) + (response.completion_tokens or 0))
            if self.budget is not None:
                self.budget.spend(call.model, response.prompt_tokens, response.completion_tokens)
            return response

    async def aclose(self) -> None:
        """Close the direct transport's HTTP session if this client made it (a transport passed
        in belongs to whoever passed it: the session closes its shared one)."""
        if self._owns_direct:
            await self._direct.aclose()

    async def _call(self, call: ModelCall) -> Any:
        if self._python is not None:
            return await self._python.complete(
                call, merge_credentials(call.params, call.credentials), timeout=self.timeout
            )
        if self.spec.http is not None:
            return await complete_http(
                self._direct,
                self.spec.http,
                call,
                merge_credentials(call.params, call.credentials),
                timeout=self.timeout,
            )
        if self.transport is Transport.OPENAI:
            return await self._direct.complete(
                call,
                self._sent_params(call),
                api_base=call.credentials.get("api_base", call.api_base),
                api_key=self._direct_key(),
                timeout=self.timeout,
            )
        completion = self._completion or import_litellm().acompletion
        kwargs: dict[str, Any] = merge_credentials(call.params, call.credentials)
        kwargs.update(
            model=call.model,
            messages=[{"role": r, "content": c} for r, c in call.messages],
            timeout=self.timeout,
            max_retries=0,
            num_retries=0,
            drop_params=True,  # e.g. a provider without `seed` support
        )
        api_base = call.credentials.get("api_base", call.api_base)
        if api_base:
            kwargs["api_base"] = api_base
        key = self.spec.api_key()
        if key is None and api_base and call.model.startswith("openai/"):
            # The OpenAI SDK under litellm refuses to send a request without a key, even to a local
            # server that takes none: give it a placeholder (the direct transport sends no header).
            key = "no-key"
        if key is not None:
            kwargs["api_key"] = key
        # litellm's own timeout covers the HTTP exchange; this one also covers everything around it.
        return await asyncio.wait_for(completion(**kwargs), timeout=self.timeout + 5.0)

    def _sent_params(self, call: ModelCall) -> Mapping[str, Any]:
        """``merge_credentials(call.params, call.credentials)``, one object per parameters and
        credentials objects (which the calls of one model and sample share): the direct
        transport keeps what it builds of a request per parameters object. Read-only."""
        memo = (id(call.params), id(call.credentials))
        kept = self._merged.find(memo)
        if kept is not None and kept[0] is call.params and kept[1] is call.credentials:
            return kept[2]
        return self._merged.put(memo, merge_credentials(call.params, call.credentials), call.params, call.credentials)

    def _direct_key(self) -> str | None:
        """The key the direct transport sends: the entry's variable, or at OpenAI's own endpoint
        (no ``api_base``) ``$OPENAI_API_KEY``, as the OpenAI SDK reads it."""
        key = self.spec.api_key()
        if key is None and not self.spec.api_base:
            key = os.environ.get(OPENAI_KEY) or None
        return key

    def _to_response(self, call: ModelCall, raw: Any, latency: float) -> Response:
        if isinstance(raw, Completion):
            text, finish_reason = raw.text, raw.finish_reason
            prompt_tokens, completion_tokens, top = raw.prompt_tokens, raw.completion_tokens, raw.top_logprobs
            system, number = raw.system_fingerprint, raw.number_logprobs
        else:
            text, finish_reason, prompt_tokens, completion_tokens = self._litellm_parts(raw)
            top, number = self._alternatives(raw)
            system = getattr(raw, "system_fingerprint", None)
        if not isinstance(text, str) or not text.strip():
            raise ProviderError("empty completion (no text in the first choice)", retryable=True)
        return construct(  # Response(...), without its __init__'s one object.__setattr__ a field
            Response,
            {
                "call": call,
                "text": text,
                "finish_reason": finish_reason,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "latency_s": round(latency, 6),
                "created": time.time(),
                "source": "network",
                "top_logprobs": top,
                "system_fingerprint": system if isinstance(system, str) and system else None,
                "fingerprint": None,
                **({"number_logprobs": number} if number is not None else {}),
            },
        )

    @staticmethod
    def _alternatives(raw: Any) -> tuple[Any, Any]:
        """The first answer token's alternatives and those at its first number
        (:func:`~pytest_llmbias.store.calls.answer_alternatives`), where litellm returned
        log-probabilities."""
        from pytest_llmbias.store.calls import answer_alternatives

        try:
            logprobs = raw.choices[0].logprobs
        except (AttributeError, IndexError, KeyError, TypeError):
            return None, None
        content = logprobs.get("content") if isinstance(logprobs, dict) else getattr(logprobs, "content", None)
        return answer_alternatives(content)

    @staticmethod
    def _litellm_parts(raw: Any) -> tuple[Any, str | None, int | None, int | None]:
        try:
            choice = raw.choices[0]
            text = choice.message.content
            finish_reason = getattr(choice, "finish_reason", None)
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise ProviderError(f"malformed completion ({type(exc).__name__}: {exc})", retryable=True) from None
        usage = getattr(raw, "usage", None)
        return text, finish_reason, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)

    def _record(self, kind: FaultKind, exc: BaseException, call: ModelCall, *, retried: bool) -> None:
        """Count a failed attempt in the run's :class:`FaultLog` (the first of a kind is told at once)."""
        if self.faults is not None:
            self.faults.attempt(
                kind,
                alias=self.spec.alias,
                endpoint=describe_endpoint(self.spec),
                text=self.redact(str(exc)).strip() or type(exc).__name__,
                timeout=self.timeout,
                concurrency=self.adaptive.ceiling if self.adaptive is not None else 1,
                max_tokens=call.params.get("max_tokens"),
                retried=retried,
            )

    def _final_error(
        self,
        exc: BaseException,
        status: int | None,
        retryable: bool,
        attempt: int,
        retry_after: float | None,
        kind: FaultKind | None = None,
    ) -> ProviderError:
        text = self.redact(str(exc)).strip()
        detail = text.splitlines()[0] if text else type(exc).__name__
        if len(detail) > 300:
            detail = detail[:297] + "..."
        where = f"model {self.spec.alias!r} ({describe_endpoint(self.spec)})"
        what = f"HTTP {status}" if status else type(exc).__name__
        if retryable and retry_after is not None and retry_after > self.policy.max_retry_after:
            why = (
                f"the server asked to wait {retry_after:.0f}s, more than the {self.policy.max_retry_after:.0f}s allowed"
            )
        elif retryable:
            why = f"gave up after {attempt + 1} attempts"
        else:
            why = "not retryable"
        hint = likely_cause(status, detail, self.spec)
        return ProviderError(
            f"{where}: {what}: {detail} ({why})" + (f"; likely cause: {hint}" if hint else ""),
            status=status,
            retryable=retryable,
            likely_cause=hint,
            kind=kind.value if kind is not None else None,
        )


def describe_endpoint(spec: ModelSpec) -> str:
    """What an error names a model by: its model string and endpoint, its Python callable, or
    its HTTP application's method and URL."""
    if spec.python is not None:
        return f"python: {spec.python}"
    if spec.http is not None:
        return f"{spec.http.method} {spec.http.url}"
    return f"{spec.model} at " + (strip_userinfo(spec.api_base) if spec.api_base else "its provider’s public endpoint")


def likely_cause(status: int | None, detail: str, spec: ModelSpec) -> str | None:
    """What a newcomer most likely got wrong, for the errors a first run meets: nothing listening at
    the endpoint, a key refused, a model the server does not serve."""
    lowered = detail.lower()
    # litellm reports a refused connection as an HTTP 500 "Connection error."
    unreachable = "connection error" in lowered or (
        status is None
        and any(
            s in lowered
            for s in (
                "cannot connect",
                "connection refused",
                "connect call failed",
                "name or service not known",
                "nodename nor servname",
            )
        )
    )
    if spec.python is not None:
        return None  # the callable's own error says it
    base = spec.http.url if spec.http is not None else strip_userinfo(spec.api_base)
    if unreachable:
        return (
            f"nothing answers at {base}: is the server running, and is the address right?"
            if base
            else "the provider's endpoint cannot be reached: check the network or a proxy"
        )
    if status in (401, 403) and spec.http is not None:
        return "the credentials were refused: check the variables the entry's http.headers read"
    if status in (401, 403):
        key = f"${spec.api_key_env}" if spec.api_key_env else "the provider's key variable (or api_key_env)"
        return f"the key was refused: check {key}"
    if status == 404 and spec.http is not None:
        return f"the application has no route {spec.http.method} {spec.http.url}: check http.url"
    if status == 404:
        return f"the endpoint does not serve the model {spec.model!r}: check its name (and api_base's /v1)"
    return None


OPENAI_KEY = "OPENAI_API_KEY"


def check_credentials(spec: ModelSpec, *, direct: bool = False, environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError`, in one line naming what to set, when a call to ``spec`` cannot
    carry the key (or endpoint) it needs: the variable ``api_key_env`` names is unset, or — with no
    ``api_key_env`` and no ``api_base`` — litellm says the provider's variable is missing (say
    ``OPENAI_API_KEY`` for ``openai/...`` at OpenAI). A model at an ``api_base`` (a local or
    self-hosted server) needs no key unless its entry names one."""
    env = os.environ if environ is None else environ
    spec.api_key(env)
    if spec.api_key_env is not None or spec.api_base:
        return
    if direct:  # the direct transport at OpenAI's own endpoint
        missing = [] if env.get(OPENAI_KEY) else [OPENAI_KEY]
    else:
        try:
            check = import_litellm().validate_environment(model=spec.model)
        except Exception:  # litellm does not know the provider: let the call say what is wrong
            return
        missing = [k for k in check.get("missing_keys") or () if not env.get(k)]
    if not missing:
        return
    name = missing[0]
    if name.endswith("_API_BASE"):
        raise ConfigError(
            f"model {spec.alias!r} ({spec.model}) has no endpoint: set ${name}, or give 'api_base' in its entry"
        )
    raise ConfigError(
        f"model {spec.alias!r} ({spec.model}) needs an API key and ${name} is not set: set it, name the variable "
        "that holds the key in 'api_key_env', or give 'api_base' if the model is served locally"
    )
