"""Remote shops: the desk's records no longer point into the demo's tables. A conversation's order scope is the
order's number; a staff action keeps the shop's ids in its result; ShopEffect records what the desk made happen
in the shop (filled here from the demo's refunds and seller messages the desk made, so the per-conversation
limits carry on). A staff action may be pending (saved before the shop is asked)."""

import django.db.models.deletion
import uuid
from django.db import migrations, models


def scope_numbers(apps, schema_editor):
    Conversation = apps.get_model("support", "Conversation")
    for conversation in Conversation.objects.exclude(order_scope=None).select_related("order_scope"):
        conversation.order_scope_number = conversation.order_scope.number
        conversation.save(update_fields=["order_scope_number"])


def scope_rows(apps, schema_editor):
    Conversation, Order = apps.get_model("support", "Conversation"), apps.get_model("support", "Order")
    for conversation in Conversation.objects.exclude(order_scope_number=""):
        conversation.order_scope = Order.objects.filter(number=conversation.order_scope_number).first()
        conversation.save(update_fields=["order_scope"])


def effects_from_demo(apps, schema_editor):
    Conversation, ShopEffect = apps.get_model("support", "Conversation"), apps.get_model("support", "ShopEffect")
    Refund, SellerMessage = apps.get_model("support", "Refund"), apps.get_model("support", "SellerMessage")
    for refund in Refund.objects.exclude(tool_call_id=None).select_related("order"):
        ShopEffect.objects.get_or_create(kind="refund", key=refund.tool_call_id, defaults={
            "backend": "demo", "order_number": refund.order.number, "amount": refund.amount, "text": refund.reason,
            "shop_id": str(refund.public_id), "reference": refund.reference})
    for message in SellerMessage.objects.exclude(tool_call_id=None).select_related("order"):
        conversation = Conversation.objects.filter(public_id=message.conversation).first() \
            if message.conversation else None
        effect, _ = ShopEffect.objects.get_or_create(kind="seller_message", key=message.tool_call_id, defaults={
            "backend": "demo", "order_number": message.order.number, "text": message.body,
            "shop_id": str(message.public_id), "conversation": conversation})
        ShopEffect.objects.filter(pk=effect.pk).update(created_at=message.created_at)


class Migration(migrations.Migration):

    dependencies = [
        ('support', '0012_attachments'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='staffaction',
            name='refund',
        ),
        migrations.RemoveField(
            model_name='staffaction',
            name='seller_message',
        ),
        migrations.AddField(
            model_name='conversation',
            name='order_scope_number',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.RunPython(scope_numbers, scope_rows),
        migrations.RemoveField(model_name='conversation', name='order_scope'),
        migrations.RenameField(model_name='conversation', old_name='order_scope_number', new_name='order_scope'),
        migrations.AlterField(
            model_name='run',
            name='stop_reason',
            field=models.CharField(blank=True, choices=[('answered', 'answered'), ('turn_limit', 'turn_limit'), ('over_budget', 'over_budget'), ('escalated', 'escalated'), ('spinning', 'spinning'), ('model_error', 'model_error'), ('taken_over', 'taken_over'), ('empty_reply', 'empty_reply'), ('quota_exceeded', 'quota_exceeded'), ('internal_error', 'internal_error'), ('rejected_again', 'rejected_again'), ('conversation_budget', 'conversation_budget'), ('tool_unavailable', 'tool_unavailable'), ('stalled', 'stalled')], max_length=20),
        ),
        migrations.AlterField(
            model_name='staffaction',
            name='status',
            field=models.CharField(choices=[('pending', 'pending'), ('done', 'done'), ('refused', 'refused')], max_length=10),
        ),
        migrations.CreateModel(
            name='ShopEffect',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('kind', models.CharField(choices=[('refund', 'refund'), ('seller_message', 'seller message')], max_length=20)),
                ('key', models.CharField(max_length=255)),
                ('backend', models.CharField(max_length=20)),
                ('order_number', models.CharField(max_length=64)),
                ('amount', models.DecimalField(blank=True, decimal_places=2, max_digits=12, null=True)),
                ('text', models.TextField(blank=True)),
                ('shop_id', models.CharField(max_length=128)),
                ('reference', models.CharField(blank=True, max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('conversation', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='shop_effects', to='support.conversation')),
            ],
            options={
                'ordering': ['created_at', 'pk'],
                'constraints': [models.UniqueConstraint(fields=('kind', 'key'), name='shop_effect_once_per_key')],
            },
        ),
        migrations.RunPython(effects_from_demo, migrations.RunPython.noop),
    ]
