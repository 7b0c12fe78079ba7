"""An OpenAI-compatible stand-in LLM on 127.0.0.1 for mem0's ``infer=True`` path: it answers
``POST /v1/chat/completions`` deterministically in the shapes mem0 parses, and keeps a tally
of what it answered, so a test compares the plugin's counts with it. It checks the plumbing,
not the quality of a real model.

- mem0's fact extraction (a prompt with a ``## New Messages`` section): ``{"memory": [{"text":
  ..., "attributed_to": "user"}]}``, one fact per user line of the new messages (its first
  sentence, at most 120 characters), at most three;
- mem0's memory update (a prompt asking for ``"event"`` decisions, older mem0): every old
  memory kept, ``{"memory": [{"id": ..., "text": ..., "event": "NONE"}]}``;
- anything else: ``{"memory": []}``.

``usage``: prompt tokens are the words of the request's messages, completion tokens the words
of the answer's content. ``mode="fail"`` answers 500 to every call; ``mode="slow"`` waits
``delay`` seconds first.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_NEW = re.compile(r"## New Messages\n(.*?)(?:\n## |\Z)", re.S)


def facts_of(prompt: str) -> list[str]:
    found = _NEW.findall(prompt)  # the user prompt's section: the last (the system prompt
    section = found[-1] if found else ""  # names the sections too)
    out = []
    for line in section.splitlines():
        if line.startswith("user: ") and line[6:].strip():
            out.append(re.split(r"(?<=[.!?])\s", line[6:].strip())[0][:120])
    return out[:3]


def answer_for(messages: list[dict[str, Any]]) -> str:
    prompt = "\n".join(str(m.get("content", "")) for m in messages)
    if "## New Messages" in prompt:
        return json.dumps({"memory": [{"text": f, "attributed_to": "user"}
                                      for f in facts_of(prompt)]})
    if '"event"' in prompt:
        olds = re.findall(r'"id":\s*"([^"]+)",\s*"text":\s*"([^"]*)"', prompt)
        return json.dumps({"memory": [{"id": i, "text": t, "event": "NONE"} for i, t in olds]})
    return json.dumps({"memory": []})


@dataclass
class Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answers: list[str] = field(default_factory=list)


@contextmanager
def llm_standin(mode: str = "ok", delay: float = 0.0) -> Iterator[tuple[str, Tally]]:
    """The stand-in running: its base URL (``http://127.0.0.1:PORT/v1``) and its tally."""
    tally = Tally()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if mode == "slow":
                time.sleep(delay)
            if mode == "fail":
                data = json.dumps({"error": {"message": "stand-in failure", "type": "server"}})
                self._send(500, data)
                return
            messages = body.get("messages", [])
            content = answer_for(messages)
            prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
            completion = len(content.split())
            with lock:
                tally.calls += 1
                tally.prompt_tokens += prompt
                tally.completion_tokens += completion
                tally.answers.append(content)
            self._send(200, json.dumps({
                "id": f"standin-{tally.calls}", "object": "chat.completion", "created": 0,
                "model": body.get("model", "standin"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}))

        def _send(self, status: int, data: str) -> None:
            raw = data.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,),
                              daemon=True)  # shutdown waits one poll: 0.05 s, not 0.5
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", tally
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
