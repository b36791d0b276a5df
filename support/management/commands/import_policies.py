"""manage.py import_policies PATH|URL ...: the shop's own policies, from Markdown, HTML pages and sitemaps."""

from django.core.management.base import BaseCommand

from support.desk.policy_import import import_policies


class Command(BaseCommand):
    help = ("Import policies the agent searches: Markdown files or folders of them, HTML pages by file or URL, "
            "and sitemap.xml URLs (each page in it). A changed document gets a new version; the old one is kept.")

    def add_arguments(self, parser):
        parser.add_argument("sources", nargs="+", metavar="PATH|URL")

    def handle(self, *args, **options):
        report = import_policies(options["sources"])
        for refused in report.refused:
            self.stderr.write(f"refused {refused.source}: {refused.why} [{refused.code}]")
        self.stdout.write(report.summary())
