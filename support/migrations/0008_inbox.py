"""The inbox: who closed a conversation and when, who has it since when, each staff member's read marker,
the record of assignments and closings; and the admin's view permissions for the two staff groups
(support/desk/permissions.py GROUPS says the same; ensure_groups() recreates them when missing)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

VIEWABLE = ("customer", "seller", "order", "orderitem", "charge", "parcel", "scan", "policydocument", "refund",
            "sellermessage", "conversation", "message", "run", "step", "toolcall", "approval", "inboxevent")
GROUPS = {"Support agents": [f"view_{m}" for m in VIEWABLE],
          "Support leads": [f"view_{m}" for m in VIEWABLE]
          + ["change_customer", "change_seller", "change_policydocument"]}


def grant(apps, schema_editor):
    # Django creates a model's permissions after the whole migrate run: make them now to grant them.
    from django.contrib.auth.management import create_permissions

    config = apps.get_app_config("support")
    config.models_module = True  # a migration state's stub has none; create_permissions skips apps without
    create_permissions(config, apps=apps, verbosity=0)
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    for name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(content_type__app_label="support", codename__in=codenames))


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    for name, codenames in GROUPS.items():
        for group in Group.objects.filter(name=name):
            group.permissions.remove(*Permission.objects.filter(content_type__app_label="support",
                                                                codename__in=codenames))


class Migration(migrations.Migration):

    dependencies = [
        ('support', '0007_approval_permissions'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='assigned_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='conversation',
            name='closed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='conversation',
            name='closed_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.CreateModel(
            name='InboxEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('assigned', 'assigned'), ('unassigned', 'unassigned'), ('closed', 'closed'), ('reopened', 'reopened')], max_length=12)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('actor', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('assignee', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='inbox_events', to='support.conversation')),
            ],
            options={
                'ordering': ['created_at', 'pk'],
            },
        ),
        migrations.CreateModel(
            name='ConversationRead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('last_read_seq', models.PositiveIntegerField(default=0)),
                ('read_at', models.DateTimeField(auto_now=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reads', to='support.conversation')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('user', 'conversation'), name='conversation_read_unique')],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
