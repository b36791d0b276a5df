"""A customer's photos and PDFs: each belongs to one message of one conversation; the files live in the
"attachments" storage (settings.STORAGES), never under a public URL (support/customers/attachments.py signs them)."""

import uuid

from django.core.files.storage import Storage, storages
from django.db import models, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver


class ConfiguredStorage(Storage):
    """Whatever STORAGES["attachments"] names at the moment of use. A FileField resolves its storage once,
    when the model is defined; this forwards every call, so the backend stays a setting (and a test's)."""

    def __getattribute__(self, name):
        if name.startswith("__"):
            return super().__getattribute__(name)
        return getattr(storages["attachments"], name)


_configured = ConfiguredStorage()


def attachment_storage():
    """The configured storage (a callable keeps the backend out of migrations)."""
    return _configured


class Attachment(models.Model):
    IMAGE, PDF = "image", "pdf"
    KINDS = [(IMAGE, "Photo"), (PDF, "PDF")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey("support.Conversation", on_delete=models.CASCADE, related_name="attachments")
    message = models.ForeignKey("support.Message", on_delete=models.CASCADE, related_name="attachments")
    kind = models.CharField(max_length=8, choices=KINDS)
    content_type = models.CharField(max_length=40)  # of the stored file, as we encoded or checked it
    name = models.CharField(max_length=120)  # the customer's file name, cleaned, for display only
    size = models.PositiveIntegerField()  # bytes stored
    uploaded_size = models.PositiveIntegerField()  # bytes the customer sent
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64)  # of the stored file
    file = models.FileField(storage=attachment_storage, max_length=255)
    thumbnail = models.FileField(storage=attachment_storage, max_length=255, blank=True)  # small JPEG, images
    preview = models.FileField(storage=attachment_storage, max_length=255, blank=True)  # the model's JPEG
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["message", "pk"]

    @property
    def reference(self) -> str:
        """How people and the model name it: IMG-3F2A, PDF-7C1B."""
        return ("IMG-" if self.kind == self.IMAGE else "PDF-") + self.public_id.hex[:4].upper()

    def __str__(self) -> str:
        return f"{self.reference} ({self.name})"


@receiver(post_delete, sender=Attachment)
def _files_go_too(sender, instance: Attachment, **kwargs):
    """A deleted attachment (its conversation deleted) takes its files along, once the delete commits."""
    names = [f.name for f in (instance.file, instance.thumbnail, instance.preview) if f]
    transaction.on_commit(lambda: remove_stored(names))


def remove_stored(names: list[str]) -> None:
    """Delete stored files by name; one that cannot be deleted is an orphan, never a leak: it has no URL."""
    storage = attachment_storage()
    for name in names:
        try:
            storage.delete(name)
        except Exception:
            pass
