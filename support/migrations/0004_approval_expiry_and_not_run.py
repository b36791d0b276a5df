from datetime import timedelta

from django.conf import settings
from django.db import migrations, models
from django.db.models import F

import support.models.desk


def expiry_from_request(apps, schema_editor):
    """Approvals already waiting expire when they always would have: requested_at + the timeout."""
    Approval = apps.get_model("support", "Approval")
    Approval.objects.update(expires_at=F("requested_at") + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS))


class Migration(migrations.Migration):

    dependencies = [
        ("support", "0003_stop_reasons"),
    ]

    operations = [
        migrations.AddField(
            model_name="approval",
            name="expires_at",
            field=models.DateTimeField(db_index=True, default=support.models.desk.approval_expiry),
        ),
        migrations.RunPython(expiry_from_request, migrations.RunPython.noop),
        migrations.AddField(
            model_name="approval",
            name="not_run_reason",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
