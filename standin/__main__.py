"""`python -m standin --host 127.0.0.1 --port 8001 [--dialect vllm]`: serve the stand-in in the foreground."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from .app import create_app
from .dialects import DIALECTS
from .state import ControlState


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m standin", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added before every answer")
    parser.add_argument("--token-delay-ms", type=float, default=0.0, help="between streamed chunks")
    parser.add_argument("--dialect", default="openai", choices=list(DIALECTS),
                        help="behave like this server family (see standin/README.md)")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    state = ControlState()
    state.configure(latency_ms=args.latency_ms, token_delay_ms=args.token_delay_ms, dialect=args.dialect)
    print(f"model stand-in on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    uvicorn.run(create_app(state), host=args.host, port=args.port, log_level=args.log_level,
                access_log=False, lifespan="off", timeout_graceful_shutdown=1, backlog=4096)


if __name__ == "__main__":
    main()
