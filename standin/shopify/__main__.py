"""`python -m standin.shopify --port 8002 --token shpat_...`: serve the fake Shopify in the foreground."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from . import API_VERSION, TOKEN
from .app import FakeState, create_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m standin.shopify", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--token", default=TOKEN, help="the access token it accepts")
    parser.add_argument("--api-version", default=API_VERSION)
    parser.add_argument("--bucket-size", type=float, default=1000)
    parser.add_argument("--restore-rate", type=float, default=50, help="points a second")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    state = FakeState(args.token, args.api_version, args.bucket_size, args.restore_rate)
    print(f"fake Shopify on http://{args.host}:{args.port}/admin/api/{args.api_version}/graphql.json "
          f"(SHOPIFY_SHOP_DOMAIN=http://{args.host}:{args.port})", file=sys.stderr, flush=True)
    uvicorn.run(create_app(state), host=args.host, port=args.port, log_level=args.log_level,
                access_log=False, lifespan="off", timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
