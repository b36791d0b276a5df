"""`python -m standin.warranty --port 8003 [--token T]`: the demo warranty service in the foreground. It prints the
MCP_SERVERS value that offers its tools to the desk (docs/tools.md)."""

from __future__ import annotations

import argparse
import json
import sys

import uvicorn

from . import setting
from .service import Records, create_app, create_mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m standin.warranty", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8003)
    parser.add_argument("--token", default=None, help="a bearer token every request must carry")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    records = Records()
    app = create_app(records, create_mcp(records), args.host, args.token)
    url = f"http://{args.host}:{args.port}/mcp"
    print(f"warranty service on {url}\nMCP_SERVERS='{json.dumps(setting(url, args.token))}'", file=sys.stderr,
          flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False, lifespan="on",
                timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
