"""Reaching a customer after they leave (FollowUp, ReplyEmailOptOut) and short refund references."""

import django.db.models.deletion
from django.db import migrations, models

import support.models.shop

ALPHABET = "23456789ABCDEFGHJKMNPQRSTWXYZ"


def give_references(apps, schema_editor):
    """Existing refunds get a reference each, distinct from every other."""
    import secrets

    Refund = apps.get_model("support", "Refund")
    taken = set()
    for refund in Refund.objects.filter(reference__isnull=True).only("pk"):
        reference = None
        while reference is None or reference in taken:
            reference = "RF-" + "".join(secrets.choice(ALPHABET) for _ in range(5))
        taken.add(reference)
        Refund.objects.filter(pk=refund.pk).update(reference=reference)


class Migration(migrations.Migration):

    dependencies = [
        ("support", "0010_rating_and_language"),
    ]

    operations = [
        migrations.AddField(
            model_name="refund",
            name="reference",
            field=models.CharField(editable=False, max_length=12, null=True),
        ),
        migrations.RunPython(give_references, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="refund",
            name="reference",
            field=models.CharField(default=support.models.shop.new_refund_reference, editable=False, max_length=12,
                                   unique=True),
        ),
        migrations.CreateModel(
            name="FollowUp",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("seen_at", models.DateTimeField(blank=True, null=True)),
                ("seen_seq", models.PositiveIntegerField(default=0)),
                ("emailed_seq", models.PositiveIntegerField(default=0)),
                ("emailed_at", models.DateTimeField(blank=True, null=True)),
                ("link_version", models.PositiveIntegerField(default=1)),
                ("time_zone", models.CharField(blank=True, max_length=64)),
                ("conversation", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                      related_name="follow_up", to="support.conversation")),
            ],
        ),
        migrations.CreateModel(
            name="ReplyEmailOptOut",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("customer", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                  related_name="reply_email_opt_out", to="support.customer")),
            ],
        ),
    ]
