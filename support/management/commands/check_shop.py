"""manage.py check_shop: does a shop's server keep the shop contract (docs/shop-contract.md)?

One line a check (ok, or FAIL and what is wrong); --json prints the report as one JSON object instead. Exit
status 1 when any check failed. --write also makes a 0.01 refund and sends a seller message on the order
named: use a test customer's order.
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from support.shop.conformance import check_shop


class Command(BaseCommand):
    help = ("Check a shop's server against the shop contract: signing, reads and the shape of each answer, and "
            "with --write idempotent writes. Exit status 1 when a check fails.")

    def add_arguments(self, parser):
        parser.add_argument("--url", default=None, help="the shop's base URL (default SHOP_URL)")
        parser.add_argument("--key", default=None, help="the key the desk signs with (default SHOP_API_KEY)")
        parser.add_argument("--email", required=True, help="a test customer's e-mail address")
        parser.add_argument("--order", required=True, help="one of that customer's order numbers")
        parser.add_argument("--write", action="store_true",
                            help="also refund 0.01 and message the seller on the order, each twice with one key")
        parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each answer")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args, **options):
        url, key = options["url"] or settings.SHOP_URL, options["key"] or settings.SHOP_API_KEY
        if not url or not key:
            raise CommandError("name the shop with --url and --key (or set SHOP_URL and SHOP_API_KEY)")
        checks = check_shop(url=url, key=key, email=options["email"], order_number=options["order"],
                            write=options["write"], timeout=options["timeout"])
        ok = all(c.ok for c in checks)
        if options["json"]:
            self.stdout.write(json.dumps({"ok": ok, "url": url, "checks": [c.as_dict() for c in checks]}))
        else:
            for c in checks:
                self.stdout.write(f"ok    {c.name}" if c.ok else f"FAIL  {c.name}: {c.problem}")
            failed = sum(not c.ok for c in checks)
            self.stdout.write(f"{len(checks) - failed} of {len(checks)} checks passed")
        if not ok:
            raise SystemExit(1)
