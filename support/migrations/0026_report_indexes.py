# Indexes the reports read by (support/reports/): conversations by start, messages by author and time, runs by time.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('support', '0025_draft_tests'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['created_at'], name='conversation_created_at'),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(fields=['conversation', 'author', 'created_at'], name='message_conv_author_at'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['conversation', 'created_at'], name='run_conv_created_at'),
        ),
    ]
