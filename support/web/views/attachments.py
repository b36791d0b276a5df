"""Attachments over HTTP: the customer sends a message with photos or PDFs and reads fresh links to their
conversation's files; staff read fresh links to any file; both open files through signed, expiring URLs.

Who may see a file: the customer holding that conversation's token (the links they are given name their
conversation's files only), and staff (a staff link also needs a staff session). Nothing is public: the
storage has no URL of its own, and a link is only good for ATTACHMENT_URL_MAX_AGE seconds.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFilesSent
from django.http import FileResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from support.customers import attachments
from support.customers.identity import parse_uuid
from support.desk import services, uploads
from support.desk.serializers import message_json
from support.models import Attachment
from support.ops import limits

from .common import ApiError, api, staff_required
from .customer import _conversation

FIELD = "file"  # the form field each file is sent in, repeated for several
UNCOUNTED_RETRY_AFTER = 5  # seconds: when the upload limit could not be counted (its Redis unreachable)
# What a served file may do in the browser: nothing. An image shows (img-src), no script runs, no form or
# plugin loads, and `sandbox` gives the document an opaque origin, not the desk's.
FILE_POLICY = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"


def _refusal(status: int, code: str, message: str, *, retry_after: int | None = None, **extra) -> JsonResponse:
    """The API's error shape; a refusal worth retrying says when, in Retry-After and in the body."""
    body = {"error": message, "code": code, "retryable": status in (429, 503), **extra}
    if retry_after is None:
        return JsonResponse(body, status=status)
    return JsonResponse({**body, "retry_after": retry_after}, status=status, headers={"Retry-After": str(retry_after)})


@csrf_exempt
@api("GET", "POST")
def conversation_attachments(request, public_id):
    """GET: the limits and the conversation's files with fresh links. POST (multipart/form-data): a message
    with files: `file` once per file, `text` (optional), `client_id` (optional: a retry is saved once)."""
    conversation = _conversation(request, public_id)
    if request.method == "GET":
        files = conversation.attachments.order_by("pk")
        return JsonResponse({"limits": attachments.limits_json(),
                             "attachments": [attachments.attachment_json(a, staff=False) for a in files]})
    return _post(request, conversation)


def _post(request, conversation):
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > attachments.request_size_limit():  # refused before a byte of the body is read
        return _refusal(413, "attachment_too_large", "These files are too large to send together: each file can be "
                        f"up to {attachments.limit_size(settings.ATTACHMENT_MAX_BYTES)}, and "
                        f"{settings.ATTACHMENTS_PER_MESSAGE} files go in one message.")
    if request.content_type != "multipart/form-data":
        raise ApiError(415, "Send files as multipart/form-data, each in a field named \"file\".")
    address = limits.request_address(request)
    try:
        limits.hit(attachments.upload_limit(address))
    except limits.Limited as over:
        return _refusal(429, "rate_limited", f"You have sent a lot of files in the last hour. Please wait "
                        f"{over.retry_after // 60 + 1} minutes and try again.", retry_after=over.retry_after)
    except limits.Unavailable as error:
        # Uncounted uploads are what the limit is there to stop (each costs decoding photos): refused until
        # the limit can be counted again, as a sign-in guess is.
        limits.warn_unavailable("uploads refused", error)
        return _refusal(503, "unavailable", "Sending files is unavailable for a moment. Please send them again "
                        "in a few seconds.", retry_after=UNCOUNTED_RETRY_AFTER)
    try:
        files, text, client_id = request.FILES.getlist(FIELD), request.POST.get("text", ""), request.POST.get("client_id")
    except (RequestDataTooBig, TooManyFilesSent):
        return _refusal(413, "attachment_too_large", "That upload is too large to read.")
    try:
        message, run, created = uploads.conversation_post_files(
            conversation=conversation, text=text, uploads=files, client_id=client_id or None,
            client_address=address)
    except attachments.Refused as refused:
        return _refusal(refused.status, refused.code, str(refused), retry_after=refused.retry_after,
                        **({"file": refused.file} if refused.file else {}))
    except services.InvalidMessage as error:
        return _refusal(400, error.code, str(error))
    except services.RateLimited as error:
        raise ApiError(429, str(error), {"Retry-After": str(error.retry_after)}) from None
    return JsonResponse({"message": message_json(message, staff=False),
                         "run": {"id": str(run.public_id), "status": run.status} if run else None,
                         "created": created}, status=202)


@api("GET")
@staff_required
def staff_attachment(request, public_id):
    """Fresh links to one file, for a console that held its links longer than they last."""
    wanted = parse_uuid(public_id)
    attachment = Attachment.objects.filter(public_id=wanted).first() if wanted else None
    if attachment is None:
        raise ApiError(404, "No such file.")
    return JsonResponse({"attachment": attachments.attachment_json(attachment, staff=True)})


@api("GET")
def attachment_file(request, token):
    """The file (or its thumbnail) a signed link names, while the link is fresh."""
    try:
        attachment, variant, staff_only = attachments.from_signed(token)
    except attachments.BadLink as bad:
        if bad.expired:
            return _refusal(403, "link_expired", "This link has expired. Open the conversation again to see the file.")
        raise ApiError(404, "No such file.") from None
    if attachment is None:
        raise ApiError(404, "No such file.")
    if staff_only and not (request.user.is_authenticated and request.user.is_staff):
        raise ApiError(403, "Log in with a staff account to open this file.")
    stored = attachment.file if variant == "file" else attachment.thumbnail
    if not stored:
        raise ApiError(404, "No such file.")
    try:
        handle = stored.open("rb")
    except OSError:
        raise ApiError(404, "This file is no longer available.") from None
    thumbnail = variant == "thumbnail"
    name = attachment.name if not thumbnail else f"{attachment.reference}-thumbnail.jpg"
    # A PDF is downloaded, never opened on the desk's origin: a browser's PDF viewer runs the file's own
    # scripts and forms outside any policy we could set on the page, and on this origin the console's session
    # is one click away. Photos (pixels we wrote) and thumbnails are shown inline.
    download = attachment.kind == Attachment.PDF and not thumbnail
    response = FileResponse(handle, content_type="image/jpeg" if thumbnail else attachment.content_type,
                            as_attachment=download, filename=name)
    response["Cache-Control"] = "private, max-age=600"
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"
    response["X-Content-Type-Options"] = "nosniff"  # served as the type we checked, never as a guess
    response["Content-Security-Policy"] = FILE_POLICY
    return response
