"""Four eyes: an approval keeps a first approver (and what they approved) until a second person decides; a
staff member's own refund above SECOND_APPROVAL_ABOVE waits as an approval of its StaffAction (no run, no
tool call). And the permission to export the audit (support.export_audit), given to Support leads."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


EXPORT_AUDIT = ("export_audit", "Can export the audit of decisions and staff actions")


def grant_export(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(app_label="support", model="approval")
    permission, _ = Permission.objects.get_or_create(content_type=content_type, codename=EXPORT_AUDIT[0],
                                                     defaults={"name": EXPORT_AUDIT[1]})
    Group.objects.get_or_create(name="Support leads")[0].permissions.add(permission)


def revoke_export(apps, schema_editor):
    apps.get_model("auth", "Permission").objects.filter(content_type__app_label="support",
                                                        codename=EXPORT_AUDIT[0]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('support', '0017_decide_channels'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name='approval',
            name='first_answer',
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='approval',
            name='first_approved_at',
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name='approval',
            name='first_approved_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='approval',
            name='first_arguments',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='approval',
            name='requested_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='approval',
            name='staff_action',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='approval', to='support.staffaction'),
        ),
        migrations.AlterField(
            model_name='approval',
            name='run',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='approvals', to='support.run'),
        ),
        migrations.AlterField(
            model_name='approval',
            name='tool_call',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='approval', to='support.toolcall'),
        ),
        migrations.AlterField(
            model_name='staffaction',
            name='status',
            field=models.CharField(choices=[('pending', 'pending'), ('done', 'done'), ('refused', 'refused'), ('awaiting_approval', 'awaiting approval')], max_length=20),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('run__isnull', False), ('tool_call__isnull', False)), models.Q(('run__isnull', True), ('staff_action__isnull', False), ('tool_call__isnull', True)), _connector='OR'), name='approval_of_a_call_or_a_staff_action'),
        ),
        migrations.RunPython(grant_export, revoke_export),
    ]
