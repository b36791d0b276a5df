"""The suite's quicker flush (tests/flush.py): what a committed test wrote is gone for the next test, and the
hook it replaces still has the shape it was written for."""

import inspect

import pytest
from django.core.management.color import no_style
from django.db import connection

from support.models import Conversation, Customer
from tests import flush


def test_djangos_flush_hook_still_takes_what_the_quicker_one_passes_on():
    for original in flush.DJANGOS.values():
        params = inspect.signature(original).parameters
        assert list(params)[:3] == ["self", "style", "tables"]
        assert params["reset_sequences"].kind is params["allow_cascade"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.django_db(transaction=True)
def test_a_committed_tests_rows_are_emptied_by_the_flush_and_the_permissions_stay():
    from django.contrib.auth.models import Permission

    customer = Customer.objects.create(email="flush@example.com", name="Flush")
    Conversation.objects.create(customer=customer)
    permissions = Permission.objects.count()
    assert permissions > 0
    statements = connection.ops.sql_flush(no_style(), connection.introspection.django_table_names(
        only_existing=True, include_views=False))
    assert not any("auth_permission" in s or "django_content_type" in s for s in statements)
    connection.ops.execute_sql_flush(statements)  # what Django runs after a committed test
    assert (Customer.objects.count(), Conversation.objects.count()) == (0, 0)
    assert Permission.objects.count() == permissions
