"""What every page's template may read besides its own context: the shop's name (the live agent profile's), so
the console speaks of the shop it serves, not of the demo."""

from django.utils.functional import SimpleLazyObject

from support import profiles


def desk(request) -> dict:
    # Lazy: read only by a template that names it (the console's frame, its plain pages), once per request.
    return {"desk_shop_name": SimpleLazyObject(lambda: profiles.live().shop_name)}
