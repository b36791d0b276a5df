"""Deciding away from the console: where each decision was made (Approval.decided_via), the staff e-mailed
approval requests, the links those e-mails carry, Slack users mapped to staff accounts and the Slack message
of each approval. Decisions a person made before this migration were all made in the console, so they say so."""

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


def console_before(apps, schema_editor):
    Approval = apps.get_model("support", "Approval")
    Approval.objects.filter(decided_by__isnull=False).update(decided_via="console")


class Migration(migrations.Migration):

    dependencies = [
        ('support', '0016_policy_edits'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='approval',
            name='decided_via',
            field=models.CharField(blank=True, choices=[('console', 'the console'), ('email', 'an e-mailed link'), ('slack', 'Slack')], max_length=10),
        ),
        migrations.RunPython(console_before, migrations.RunPython.noop),
        migrations.CreateModel(
            name='ApprovalEmailOptIn',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='approval_emails', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'approval e-mails for a staff member',
                'verbose_name_plural': 'approval e-mails: staff who get them',
            },
        ),
        migrations.CreateModel(
            name='SlackAccount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slack_user_id', models.CharField(help_text="The member ID Slack shows in the person's profile (⋮ → Copy member ID), e.g. U024BE7LH.", max_length=32, unique=True)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='slack_account', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='SlackApprovalMessage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('channel', models.CharField(max_length=64)),
                ('ts', models.CharField(blank=True, max_length=32)),
                ('posted_at', models.DateTimeField(auto_now_add=True)),
                ('approval', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='slack_message', to='support.approval')),
            ],
        ),
        migrations.CreateModel(
            name='DecisionLink',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('kind', models.CharField(choices=[('approve', 'approve'), ('reject', 'reject')], max_length=8)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('used_at', models.DateTimeField(blank=True, null=True)),
                ('approval', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decision_links', to='support.approval')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('approval', 'user', 'kind'), name='one_link_per_verdict')],
            },
        ),
    ]
