"""Who may decide approvals: two permissions on Approval and the two groups that hold them.

support.decide_approval: approve or reject a gated call. support.approve_large_refund: approve a refund
above LARGE_REFUND_THRESHOLD. "Support agents" get the first, "Support leads" both (support/desk/permissions.py
says the same and recreates them when missing). Written here, not in the model's Meta, so that no table
changes; reversing removes the groups and permissions again.
"""

from django.db import migrations

PERMISSIONS = {
    "decide_approval": "Can approve or reject the agent's gated actions",
    "approve_large_refund": "Can approve refunds above the large-refund threshold",
}
GROUPS = {"Support agents": ["decide_approval"], "Support leads": ["decide_approval", "approve_large_refund"]}


def create(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(app_label="support", model="approval")
    perms = {codename: Permission.objects.get_or_create(content_type=content_type, codename=codename,
                                                        defaults={"name": name})[0]
             for codename, name in PERMISSIONS.items()}
    for name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*(perms[c] for c in codenames))


def remove(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    Group.objects.filter(name__in=GROUPS).delete()
    Permission.objects.filter(content_type__app_label="support", codename__in=PERMISSIONS).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("support", "0006_conversation_order_scope"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create, remove)]
