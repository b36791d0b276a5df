"""The demo shop page: what a real shop would serve, with the one script tag that embeds the widget.

The page plays the shop's server: it signs its logged-in customer's e-mail (support.customers.identity.customer_token)
and hands the token to the widget in a data attribute. "Logged in" is one of the three demo customers,
Maya by default, another with ?as=<e-mail>.
"""

from django.http import Http404
from django.shortcuts import render

from support.customers.identity import customer_token
from support.models import Customer

DEMO_CUSTOMERS = ("maya@example.com", "tom@example.com", "ines@example.com")

# A few things Sundry sells (the demo orders' items); "art" names the product picture's CSS class.
PRODUCTS = [
    ("Hand-loomed wool cushion cover, rust", "Hearth & Loom", "34.50", "cushion"),
    ("Herringbone wool throw, grey", "Hearth & Loom", "79.00", "throw"),
    ("Linen tea towels, set of 4", "Hearth & Loom", "64.00", "towels"),
    ("Folding LED lantern", "Sundry Warehouse", "21.50", "lantern"),
    ("Stovetop kettle, brushed steel", "Sundry Warehouse", "38.00", "kettle"),
    ("Loose-leaf tea sampler", "Sundry Warehouse", "27.50", "tea"),
]


def index(request):
    email = request.GET.get("as", DEMO_CUSTOMERS[0])
    if email not in DEMO_CUSTOMERS:
        raise Http404("Only the demo customers can be signed in here.")
    customer = Customer.objects.filter(email=email).first()
    if customer is None:
        raise Http404("The demo data is not seeded: run `./dev serve` or `manage.py seed_demo`.")
    orders = customer.orders.select_related("seller").prefetch_related("items", "parcels__scans")
    return render(request, "shop/index.html", {
        "customer": customer,
        "orders": orders,
        "customer_token": customer_token(customer.email),
        "others": [e for e in DEMO_CUSTOMERS if e != email],
        "products": [dict(zip(("title", "seller", "price", "art"), p)) for p in PRODUCTS],
    })
