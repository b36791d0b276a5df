"""A photo of a damaged item, from the customer's widget to the agent and to staff: the agent asks for it, the
customer attaches it (a preview first), the agent reads it and asks for the refund, staff see the thumbnail
in the console, open the full photo and approve. A file that is not a photo is refused in plain words.
Screenshots at 1280 and 390 px: var/screenshots/attachments-*.png."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from PIL import Image, ImageDraw
from playwright.sync_api import expect

from support.models import Attachment
from tests.browser import conftest
from tests.browser.conftest import agent_messages, ask, open_widget, refundable_again, widget_conversation
from tests.browser.test_approval_cards import snap

# The worker's model reads images (the stand-in does): photos reach it as image parts. Set before the
# session's processes start; it changes nothing for conversations without photos.
conftest.ENV["MODEL_ACCEPTS_IMAGES"] = "true"


def cracked_photo(path) -> str:
    """A photo-like JPEG of a cracked speaker, with a camera's EXIF location in it."""
    image = Image.new("RGB", (1600, 1200), (236, 232, 226))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((500, 180, 1100, 1080), radius=60, fill=(40, 42, 48))
    draw.ellipse((630, 560, 970, 900), fill=(88, 90, 98))
    draw.ellipse((720, 280, 880, 440), fill=(88, 90, 98))
    draw.line([(560, 240), (700, 420), (650, 600), (820, 760), (760, 1020)], fill=(250, 250, 250), width=9)
    exif = Image.Exif()
    place = exif.get_ifd(0x8825)
    place[1], place[2], place[3], place[4] = "N", (52.0, 31.0, 12.0), "E", (13.0, 24.0, 36.0)
    image.save(path, "JPEG", exif=exif, quality=88)
    return str(path)


def not_a_photo(path) -> str:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("readme.txt", "hello")
    path.write_bytes(out.getvalue())
    return str(path)


def loaded(image) -> bool:
    return image.evaluate("img => img.complete && img.naturalWidth > 0")


def test_a_photo_reaches_the_agent_and_staff(site, customer_page, staff_page, model_control, tmp_path):
    refundable_again("SU-41402")  # earlier tests' refunds and decisions on the order out of the way
    customer = customer_page()
    open_widget(customer)
    ask(customer, "My speakers from SU-41402 arrived cracked, I can send a photo.")
    conversation = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    expect(agent_messages(customer).last).to_contain_text("please attach one of the damaged item")

    # Chosen, previewed in the tray, removable; then sent with a few words.
    customer.get_by_test_id("widget-file-input").set_input_files(cracked_photo(tmp_path / "IMG_4031.jpg"))
    chip = customer.get_by_test_id("widget-chip")
    expect(chip).to_have_count(1)
    expect(chip).to_contain_text("IMG_4031.jpg")
    expect(chip.locator("img")).to_be_visible()
    customer.get_by_test_id("widget-input").fill("Here it is, the front is cracked.")
    snap(customer, "attachments-widget-preview")
    customer.get_by_test_id("widget-send").click()

    sent = customer.locator('[data-testid="widget-message"][data-author="customer"]').filter(
        has=customer.get_by_test_id("widget-file"))
    expect(sent).to_have_count(1, timeout=15000)
    expect(sent).to_contain_text("Here it is, the front is cracked.")
    expect(customer.get_by_test_id("widget-tray")).to_be_hidden()
    thumb = sent.get_by_test_id("widget-file").locator("img")
    expect(thumb).to_be_visible()
    customer.wait_for_function("""() => {
        const img = document.querySelector('[data-testid="widget-host"]').shadowRoot.querySelector('.sw-file-thumb');
        return img && img.complete && img.naturalWidth > 0; }""", timeout=10000)
    attachment = Attachment.objects.get(conversation__public_id=conversation)
    assert sent.get_by_test_id("widget-file").get_attribute("data-ref") == attachment.reference
    assert "/api/files/" in sent.get_by_test_id("widget-file").get_attribute("href")

    # The agent read it (the stand-in got an image part) and asks for the refund the policy allows.
    expect(customer.get_by_test_id("widget-approval-banner")).to_be_visible(timeout=20000)
    assert any(r.get("images") for r in model_control("/requests"))
    snap(customer, "attachments-widget-sent")

    # Staff see the thumbnail in the transcript, open the full photo, approve.
    staff = staff_page(f"/console/conversations/{conversation}/")
    files = staff.get_by_test_id("transcript").get_by_test_id("message-file")
    expect(files).to_have_count(1, timeout=10000)
    expect(files).to_contain_text(attachment.reference)
    expect(files).to_contain_text("1600×1200")
    staff.wait_for_function("""() => { const img = document.querySelector('[data-testid="message-file"] img');
        return img && img.complete && img.naturalWidth > 0; }""", timeout=10000)
    files.scroll_into_view_if_needed()
    snap(staff, "attachments-console")
    with staff.expect_popup() as opened:
        files.click()
    full = opened.value
    full.wait_for_load_state()
    assert "/api/files/" in full.url
    assert full.evaluate("document.contentType") == "image/jpeg"
    assert full.evaluate("() => document.images[0] && document.images[0].naturalWidth") == 1600
    full.close()

    card = staff.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")
    expect(card).to_have_count(1, timeout=10000)
    expect(card.get_by_test_id("approval-summary")).to_contain_text("Refund 129.00 EUR on SU-41402")
    # The card shows the photo among what the customer sent before the request, without its placeholder text.
    request = card.get_by_test_id("approval-customer-request")
    expect(request.get_by_test_id("message-file")).to_contain_text(attachment.reference)
    expect(request).not_to_contain_text("[Sent a photo]")
    card.scroll_into_view_if_needed()
    snap(staff, "attachments-approval-card")
    card.get_by_test_id("approve-button").click()
    expect(agent_messages(customer).last).to_contain_text("Thank you for the photo.", timeout=20000)
    expect(agent_messages(customer).last).to_contain_text("129.00 EUR")
    snap(customer, "attachments-widget-refunded")

    # The same link, without the staff session: refused.
    link = files.get_attribute("href")
    anonymous = customer.context.request.get(site + link)
    assert anonymous.status == 403


def test_a_file_that_is_not_a_photo_is_refused_in_plain_words(site, customer_page, tmp_path):
    customer = customer_page()
    open_widget(customer)
    customer.get_by_test_id("widget-file-input").set_input_files(not_a_photo(tmp_path / "receipt.png"))
    expect(customer.get_by_test_id("widget-chip")).to_have_count(1)
    customer.get_by_test_id("widget-send").click()
    error = customer.get_by_test_id("widget-error")
    expect(error).to_be_visible(timeout=10000)
    expect(error).to_contain_text("“receipt.png” isn't a photo or a PDF we can read")
    # Nothing was sent: the file is back in the tray, to remove or replace.
    expect(customer.get_by_test_id("widget-chip")).to_have_count(1)
    expect(customer.locator('[data-testid="widget-message"][data-author="customer"]')).to_have_count(0)
    snap(customer, "attachments-widget-refused")
    customer.get_by_test_id("widget-chip-remove").click()
    expect(customer.get_by_test_id("widget-tray")).to_be_hidden()


def test_a_pdf_is_a_download_for_the_customer_and_for_staff(site, customer_page, staff_page, tmp_path):
    """The desk serves a PDF as a download, never as a page on its origin: both tiles say so, and open none."""
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    path = tmp_path / "receipt.pdf"
    path.write_bytes(pdf)
    customer = customer_page()
    open_widget(customer)
    customer.get_by_test_id("widget-file-input").set_input_files(str(path))
    expect(customer.get_by_test_id("widget-chip")).to_contain_text("receipt.pdf")
    customer.get_by_test_id("widget-send").click()
    tile = customer.locator('[data-testid="widget-message"][data-author="customer"]').get_by_test_id("widget-file")
    expect(tile).to_have_count(1, timeout=15000)
    expect(tile).to_contain_text("receipt.pdf")
    expect(tile).to_contain_text("Download")
    assert "download it" in tile.get_attribute("aria-label")
    snap(customer, "attachments-widget-pdf")
    with customer.expect_download() as got:
        tile.click()
    assert got.value.suggested_filename == "receipt.pdf"
    assert Path(got.value.path()).read_bytes() == pdf
    assert len(customer.context.pages) == 1  # no tab was opened for it

    conversation = widget_conversation(customer)["id"]
    staff = staff_page(f"/console/conversations/{conversation}/")
    file = staff.get_by_test_id("transcript").get_by_test_id("message-file")
    expect(file).to_have_count(1, timeout=10000)
    expect(file).to_contain_text("receipt.pdf")
    expect(file).to_contain_text("Download")
    file.scroll_into_view_if_needed()
    snap(staff, "attachments-console-pdf")
    with staff.expect_download() as got:
        file.click()
    assert got.value.suggested_filename == "receipt.pdf"
    assert Path(got.value.path()).read_bytes() == pdf
    assert len(staff.context.pages) == 1
