"""mem0's LLM, as the user configures it, and what it spent.

``+infer:true`` makes mem0 call an LLM at each ``add`` (its fact extraction). The settings
are the user's: ``--retrieval-eval-llm PROVIDER:MODEL`` (ini ``retrieval_eval_llm``; default
mem0's own, ``openai`` and its default model), ``--retrieval-eval-llm-base-url`` (default the
provider's own, or ``OPENAI_BASE_URL``), ``--retrieval-eval-llm-timeout`` (seconds a call may
take, default 60). The key is never in a file: mem0's provider reads it from the environment
(``OPENAI_API_KEY``, ...). Under ``+infer:false`` mem0 still builds its LLM client, but never
calls it: it is given a placeholder key so that nothing needs one.

:class:`LlmMeter` counts the calls mem0 made and the prompt and completion tokens the
provider reported (an OpenAI-compatible answer's ``usage``), per persona, as ingest costs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import RetrieverError, one_line

__all__ = ["LlmMeter", "LlmSettings", "llm_config", "llm_settings"]

#: The key mem0's OpenAI client is built with under ``+infer:false`` (no call is made).
UNUSED_KEY = "unused-infer-false"


@dataclass(frozen=True)
class LlmSettings:
    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    timeout: float = 60.0

    def label(self) -> str:
        return f"{self.provider}:{self.model or 'default'}" + (
            f" at {self.base_url}" if self.base_url else "")


def llm_settings(settings: object) -> LlmSettings:
    """The run's LLM settings (the options and their ini twins; none: mem0's defaults)."""
    spec = getattr(settings, "llm", None)
    provider, model = "openai", None
    if isinstance(spec, str) and spec:
        provider, _, rest = spec.partition(":")
        model = rest or None
    base = getattr(settings, "llm_base_url", None)
    timeout = getattr(settings, "llm_timeout", 60.0)
    return LlmSettings(provider, model, base if isinstance(base, str) and base else None,
                       float(timeout) if isinstance(timeout, (int, float)) else 60.0)


def llm_config(llm: LlmSettings, infer: bool) -> dict[str, Any]:
    """mem0's ``llm`` config block for these settings."""
    config: dict[str, Any] = {}
    if llm.model:
        config["model"] = llm.model
    if llm.provider == "openai":
        if llm.base_url:
            config["openai_base_url"] = llm.base_url
        if not infer and not os.environ.get("OPENAI_API_KEY"):
            config["api_key"] = UNUSED_KEY
    return {"provider": llm.provider, "config": config}


@dataclass
class LlmMeter:
    """The calls mem0's LLM made for one persona, and the tokens its answers reported."""

    settings: LlmSettings
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ms: float = 0.0
    _usage: list[Any] = field(default_factory=list)

    def attach(self, llm: Any) -> None:
        """Wrap ``llm.generate_response`` (calls, time) and, for an OpenAI-compatible client,
        its ``chat.completions.create`` (the answer's ``usage``), with the timeout set."""
        client = getattr(llm, "client", None)
        if client is not None and callable(getattr(client, "with_options", None)):
            llm.client = client = client.with_options(timeout=self.settings.timeout,
                                                      max_retries=0)
            completions = client.chat.completions
            create = completions.create

            def counted_create(*args: Any, **kwargs: Any) -> Any:
                answer = create(*args, **kwargs)
                usage = getattr(answer, "usage", None)
                if usage is not None:
                    self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
                    self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
                return answer

            completions.create = counted_create
        generate = llm.generate_response

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            begun = time.perf_counter()
            try:
                return generate(*args, **kwargs)
            finally:
                self.ms += (time.perf_counter() - begun) * 1000.0

        llm.generate_response = counted

    def record(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "ms": round(self.ms, 3),
                "provider": self.settings.label()}

    def failure(self, name: str, persona: str, exc: BaseException) -> RetrieverError:
        """An LLM call that failed or timed out, as the item's one line."""
        cause = exc.__cause__ or exc
        return RetrieverError(
            f"{name}: persona {persona}: the LLM ({self.settings.label()}) failed: "
            f"{type(cause).__name__}: {one_line(cause, 200)}; check the key in the "
            "environment (OPENAI_API_KEY), --retrieval-eval-llm and "
            "--retrieval-eval-llm-base-url, or measure +infer:false")
