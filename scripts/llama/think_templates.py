#!/usr/bin/env python3
"""Writes the thinking chat templates of tests/llama_reasoning.rs from llama.cpp's own Qwen3
template (models/templates/Qwen-Qwen3-0.6B.jinja in the tree), which lets the model open
`<think>` itself. A random-weight model never does, so these open it in the prompt, as
thinking-only models' templates do; everything the model writes is then thinking until
`</think>`, which llama-server forces when a request's `thinking_budget_tokens` runs out.

    think_templates.py --qwen3 TREE/models/templates/Qwen-Qwen3-0.6B.jinja --out DIR

- think.jinja opens ` <think>` (with a space): SentencePiece tokenizes the tag in the prompt as
  it does the tag alone, which is how llama-server finds where thinking began; the budget
  works.
- think-nospace.jinja opens `<think>` right after a newline, where SentencePiece tokenizes `<`
  differently: llama-server never sees the thinking begin and silently ignores the budget (a
  misconfiguration servetop must catch).
- qwen3.jinja is the stock template as it is (tool calls in `<tool_call>` tags).
"""

from __future__ import annotations

import argparse
from pathlib import Path

# The end of the stock template: nothing after the assistant's turn unless thinking is off.
TAIL = """        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""


def opened(stock: str, tag: str) -> str:
    body = stock.rstrip()
    if not body.endswith(TAIL):
        raise SystemExit("think_templates: the Qwen3 template does not end as expected")
    tail = TAIL.replace(
        "    {%- endif %}\n{%- endif %}",
        "    {%- else %}\n        {{- '" + tag + "' }}\n    {%- endif %}\n{%- endif %}",
    )
    return body[: -len(TAIL)] + tail + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qwen3", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    stock = a.qwen3.read_text()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "think.jinja").write_text(opened(stock, " <think>\\n"))
    (a.out / "think-nospace.jinja").write_text(opened(stock, "<think>\\n"))
    (a.out / "qwen3.jinja").write_text(stock)
    print(f"think_templates: {a.out}/think.jinja, think-nospace.jinja, qwen3.jinja")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
