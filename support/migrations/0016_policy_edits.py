"""Policies edited in the staff console: each version keeps its editor's note of what changed, and the
permission support.edit_policies (on PolicyDocument), given to "Support leads" (support/desk/permissions.py
says the same and recreates it when missing). Reversing removes the permission and the notes."""

from django.db import migrations, models

CODENAME, NAME = "edit_policies", "Can edit the shop's policies in the staff console"
GROUP = "Support leads"


def grant(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(app_label="support", model="policydocument")
    permission, _ = Permission.objects.get_or_create(content_type=content_type, codename=CODENAME,
                                                     defaults={"name": NAME})
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(permission)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Permission.objects.filter(content_type__app_label="support", codename=CODENAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("support", "0015_policy_versions"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="policyversion",
            name="note",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.RunPython(grant, revoke),
    ]
