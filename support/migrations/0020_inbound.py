"""Customers who write by e-mail: the mails received (raw kept, one per Message-ID), the Message-IDs of the
mails the desk sent, addresses that bounce, and the channel of each message (widget or e-mail)."""

import django.db.models.deletion
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('support', '0019_deadlines'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='channel',
            field=models.CharField(choices=[('widget', 'the widget'), ('email', 'e-mail')], default='widget', max_length=8),
        ),
        migrations.CreateModel(
            name='InboundEmail',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('mail_id', models.CharField(max_length=250, unique=True)),
                ('source', models.CharField(max_length=40)),
                ('sender', models.CharField(blank=True, max_length=254)),
                ('subject', models.CharField(blank=True, max_length=250)),
                ('raw', models.BinaryField()),
                ('size', models.PositiveIntegerField(default=0)),
                ('outcome', models.CharField(choices=[('attached', 'attached'), ('started', 'started'), ('auto_reply', 'auto_reply'), ('bounce', 'bounce'), ('loop', 'loop'), ('too_large', 'too_large'), ('rate_limited', 'rate_limited'), ('refused', 'refused'), ('empty', 'empty')], max_length=16)),
                ('detail', models.CharField(blank=True, max_length=300)),
                ('received_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('conversation', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='inbound_emails', to='support.conversation')),
                ('message', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='inbound_email', to='support.message')),
            ],
            options={
                'ordering': ['-received_at'],
            },
        ),
        migrations.CreateModel(
            name='OutboundEmail',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('mail_id', models.CharField(max_length=250, unique=True)),
                ('to', models.CharField(max_length=254)),
                ('sent_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='outbound_emails', to='support.conversation')),
            ],
            options={
                'ordering': ['sent_at'],
            },
        ),
        migrations.CreateModel(
            name='UndeliverableAddress',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.CharField(blank=True, max_length=300)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('customer', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='undeliverable', to='support.customer')),
                ('inbound_email', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='support.inboundemail')),
            ],
        ),
    ]
