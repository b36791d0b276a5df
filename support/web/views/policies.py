"""The shop's policies in the staff console. Every staff member reads them: the list, a policy, any version
kept and how it differs from the current one. Writing (the editor, a new policy) needs support.edit_policies,
checked here on every request to it and again by the desk (support/desk/policy_edit.py).

Plain server-rendered forms: Preview renders the Markdown here (support/web/policy_markdown.py, inert);
Save asks for a note of what changed and is refused, with the text kept, when someone saved another
version since the editor opened theirs.
"""

from django import forms
from django.conf import settings
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_safe

from support.desk import permissions, selectors_policies
from support.desk.policy_edit import NOTE_MAX, PolicyDraft, policy_create, policy_save
from support.desk.policy_sources import Refused
from support.web.policy_markdown import policy_html
from support.web.views.console import console_page, staff_member_required

NOTE_NEEDED = "Say in a few words what you changed: it is kept with the version, for whoever reads the history."
FIELD_IDS = {"title": "policy-title-input", "applies_to": "policy-applies", "body": "policy-body", "note": "policy-note"}


class PolicyForm(forms.Form):
    title = forms.CharField(max_length=200, error_messages={
        "required": "Give the policy a title.", "max_length": "Keep the title to %(limit_value)d characters."})
    applies_to = forms.ChoiceField(required=False, error_messages={
        "invalid_choice": "Choose all of Sundry or one of the sellers listed."})
    body = forms.CharField(error_messages={"required": "Write what the policy says."})
    note = forms.CharField(max_length=NOTE_MAX, required=False, error_messages={
        "max_length": "Keep the note to %(limit_value)d characters."})
    based_on = forms.IntegerField(min_value=0, required=False)

    def __init__(self, *args, choices, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["applies_to"].choices = choices

    def clean_body(self):
        body = self.cleaned_data["body"].replace("\r\n", "\n").replace("\r", "\n")
        if len(body.encode()) > settings.POLICY_IMPORT_MAX_BYTES:
            raise forms.ValidationError(f"The text is longer than a policy may be ({settings.POLICY_IMPORT_MAX_BYTES} "
                                        "bytes). Split it into two policies.")
        return body

    def draft(self) -> PolicyDraft:
        data = self.cleaned_data
        return PolicyDraft(data["title"], data["body"], data["applies_to"], data["note"])


@require_safe
@staff_member_required
def policy_list(request):
    return console_page(request, "policies.html", "policies", rows=selectors_policies.policy_rows(),
                        can_edit=request.user.has_perm(permissions.EDIT_POLICIES))


@require_safe
@staff_member_required
def policy_detail(request, doc_id):
    doc = selectors_policies.policy_by_doc_id(doc_id)
    if doc is None:
        return _missing(request)
    saved = request.GET.get("saved", "")
    return console_page(request, "policy.html", "policies", doc=doc, text=policy_html(doc.body),
                        latest=selectors_policies.latest_change(doc), history=selectors_policies.policy_history(doc),
                        can_edit=request.user.has_perm(permissions.EDIT_POLICIES),
                        saved=saved if saved.isdigit() else "")


@require_safe
@staff_member_required
def policy_version(request, doc_id, version):
    doc = selectors_policies.policy_by_doc_id(doc_id)
    found = selectors_policies.policy_version(doc, version) if doc is not None else None
    if found is None:
        return _missing(request)
    kept, change = found
    diff = selectors_policies.policy_diff(selectors_policies.policy_text(kept.title, kept.seller_code, kept.body),
                                          _current_text(doc))
    return console_page(request, "policy_version.html", "policies", doc=doc, kept=kept, change=change, diff=diff,
                        heading=f"{doc.title}: version {kept.version}", text=policy_html(kept.body),
                        old_label=f"version {kept.version}", new_label=f"now (version {doc.version})",
                        history=selectors_policies.policy_history(doc))


@require_http_methods(["GET", "POST"])
@staff_member_required
def policy_new(request):
    refused = _refuse_writer(request)
    if refused is not None:
        return refused
    choices = selectors_policies.seller_choices()
    if request.method == "GET":
        return _editor(request, PolicyForm(choices=choices), doc=None)
    return _submitted(request, PolicyForm(request.POST, choices=choices), doc=None)


@require_http_methods(["GET", "POST"])
@staff_member_required
def policy_edit(request, doc_id):
    refused = _refuse_writer(request)
    if refused is not None:
        return refused
    doc = selectors_policies.policy_by_doc_id(doc_id)
    if doc is None:
        return _missing(request)
    choices = selectors_policies.seller_choices(doc.seller)
    if request.method == "GET":
        initial = {"title": doc.title, "body": doc.body, "applies_to": _seller_code(doc), "based_on": doc.version}
        return _editor(request, PolicyForm(initial=initial, choices=choices), doc=doc)
    return _submitted(request, PolicyForm(request.POST, choices=choices), doc=doc)


def _submitted(request, form: PolicyForm, doc):
    """Preview or Save, as the button pressed says; every way out keeps the text as typed."""
    saving = request.POST.get("action") == "save"
    valid = form.is_valid()
    if valid and saving and not form.cleaned_data["note"].strip():
        form.add_error("note", NOTE_NEEDED)
    if doc is not None and valid and form.cleaned_data.get("based_on") is None:
        form.add_error(None, "The form lost which version it edits: open the editor again.")
    if form.errors:
        return _editor(request, form, doc=doc, status=400)
    draft = form.draft()
    if not saving:
        return _editor(request, form, doc=doc, preview=policy_html(draft.body))
    if doc is None:
        outcome = policy_create(user=request.user, draft=draft)
    else:
        outcome = policy_save(user=request.user, doc_id=doc.doc_id, draft=draft,
                              based_on=form.cleaned_data["based_on"])
    if isinstance(outcome, Refused):
        return _refused(request, form, doc, outcome)
    if outcome.outcome == "unchanged":
        return _editor(request, form, doc=doc, notice="Nothing changed, so no new version was saved.")
    return redirect(reverse("console:policy", args=[outcome.doc_id]) + f"?saved={outcome.version}")


def _refused(request, form: PolicyForm, doc, refused: Refused):
    if refused.code == "forbidden":
        return _forbidden(request, refused.why)
    if refused.code != "stale_version":
        form.add_error(None, f"Not saved: {refused.why}.")
        return _editor(request, form, doc=doc, status=409)
    # Someone saved meanwhile: show what they saved against this text, and let a second Save replace it.
    doc.refresh_from_db()
    data = request.POST.copy()
    data["based_on"] = str(doc.version)
    again = PolicyForm(data, choices=selectors_policies.seller_choices(doc.seller))
    again.is_valid()
    draft = again.draft()
    conflict = {"change": selectors_policies.latest_change(doc), "version": doc.version,
                "old_label": f"version {doc.version}, saved",
                "diff": selectors_policies.policy_diff(
                    _current_text(doc), selectors_policies.policy_text(draft.title, draft.seller_code, draft.body))}
    return _editor(request, again, doc=doc, conflict=conflict, status=409)


def _editor(request, form: PolicyForm, *, doc, status: int = 200, **context):
    # Every problem at the top too, each linked to its field: the page reloads scrolled to the top.
    errors = [(FIELD_IDS.get(name), message) for name, messages in form.errors.items() for message in messages]
    return console_page(request, "policy_edit.html", "policies", status=status, form=form, doc=doc, errors=errors,
                        choices=form.fields["applies_to"].choices, applies_to=form["applies_to"].value() or "",
                        based_on=form["based_on"].value() if doc is not None else 0, **context)


def _refuse_writer(request):
    refusal = permissions.policy_edit_refusal(request.user)
    return _forbidden(request, refusal) if refusal is not None else None


def _forbidden(request, why: str):
    permissions.log_refusal(request.user, permissions.request_address(request), f"{request.method} {request.path}: {why}")
    return console_page(request, "policy_message.html", "policies", status=403,
                        heading="You may read the policies, not change them", text=why)


def _missing(request):
    return console_page(request, "policy_message.html", "policies", status=404, heading="There is no such policy",
                        text="The link may be mistyped, or the policy or that version is not kept. Every policy "
                             "the agent reads is in the list.")


def _seller_code(doc) -> str:
    return doc.seller.code if doc.seller else ""


def _current_text(doc) -> str:
    return selectors_policies.policy_text(doc.title, _seller_code(doc), doc.body)
