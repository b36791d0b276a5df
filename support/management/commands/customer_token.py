"""Print the token the shop would sign for a customer, to try the customer API with curl."""

from django.core.management.base import BaseCommand, CommandError

from support.customers import identity
from support.models import Customer


class Command(BaseCommand):
    help = ("Print a shop customer token (valid for a day) for an e-mail, e.g. maya@example.com. Start a "
            'conversation with: curl -X POST -H "Content-Type: application/json" '
            '-d \'{"customer_token": "<token>"}\' http://127.0.0.1:8000/api/conversations')

    def add_arguments(self, parser):
        parser.add_argument("email", help="a customer of the shop, e.g. maya@example.com")

    def handle(self, *args, email, **options):
        customer = Customer.objects.filter(email__iexact=email.strip()).first()
        if customer is None:
            raise CommandError(f"No customer has the e-mail {email!r}; `manage.py seed_demo` creates the demo ones.")
        self.stdout.write(identity.customer_token(customer.email))
