"""`python -m standin.shop --port 8002 --key K [--key K2] [--db PATH] [--control-token T] [--single-brand NAME]`:
the reference shop in the foreground. With --db its refunds, messages and keys survive a restart; --control-token opens
POST /_control (faults as JSON, header X-Control-Token) to a test in another process."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from .app import ShopState, create_app
from .store import Store


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m standin.shop", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--key", action="append", required=True,
                        help="a key the desk may sign with; give two while rotating")
    parser.add_argument("--db", default=None, help="an SQLite file (default: in memory, gone at exit)")
    parser.add_argument("--control-token", default=None)
    parser.add_argument("--single-brand", metavar="NAME", default=None,
                        help="run as a single-brand store of that name: it fulfils every order itself and has no "
                             "sellers (GET /capabilities says so)")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    app = create_app(Store(args.db, args.single_brand), ShopState(), tuple(args.key), args.control_token)
    print(f"reference shop on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False,
                lifespan="off", timeout_graceful_shutdown=1, http="h11")


if __name__ == "__main__":
    main()
