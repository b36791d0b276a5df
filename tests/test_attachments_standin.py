"""The stand-in takes image parts as OpenAI does: in a user message's content list, as a URL or a base64 data
URL; anywhere else, or malformed, it answers OpenAI's 400. An image counts its tiles, not its base64 text."""

from __future__ import annotations

import base64

import openai
import pytest

from standin.conversation import read_turn
from standin.reply import IMAGE_TOKENS, prompt_tokens
from tests.standin_fixture import client_for, standin  # noqa: F401  (the fixture)

PIXEL = "data:image/png;base64," + base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()


def photo_message(text="Here it is", url=PIXEL):
    return {"role": "user", "content": [{"type": "text", "text": text},
                                        {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}]}


def test_a_user_message_with_an_image_part_is_accepted_and_logged(standin):
    client = client_for(standin)
    reply = client.chat.completions.create(model="sundry-standin-1", messages=[
        {"role": "system", "content": "You are Sundry's support agent."}, photo_message()])
    assert reply.choices[0].message is not None
    assert standin.requests()[-1]["images"] == 1


@pytest.mark.parametrize("message, words", [
    ({"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": PIXEL}}]},
     "Image URLs are only allowed for messages with role 'user'"),
    (photo_message(url="data:image/png;base64,@@@"), "Expected a base64-encoded data URL"),
    (photo_message(url="file:///etc/passwd"), "Expected a valid URL"),
    ({"role": "user", "content": [{"type": "picture", "url": PIXEL}]}, "Invalid value: 'picture'"),
    ({"role": "user", "content": [{"type": "image_url"}]}, "image_url.url"),
    ({"role": "user", "content": ["plain"]}, "expected an object"),
])
def test_image_parts_break_the_rules_as_openai_says(standin, message, words):
    client = client_for(standin)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="sundry-standin-1", messages=[
            {"role": "system", "content": "x"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, message] if message["role"] == "assistant" else [
            {"role": "system", "content": "x"}, message])
    assert words in str(refused.value)


def test_an_image_costs_its_tiles_not_its_base64_length():
    big = "data:image/jpeg;base64," + "A" * 400_000
    with_image = prompt_tokens({"messages": [photo_message(url=big)]})
    without = prompt_tokens({"messages": [{"role": "user", "content": [{"type": "text", "text": "Here it is"}]}]})
    assert with_image - without == IMAGE_TOKENS


def test_a_photo_counts_whether_it_came_as_an_image_part_or_as_the_desks_note():
    asked = [{"role": "system", "content": "x"}, {"role": "user", "content": "SU-41402 arrived cracked"},
             {"role": "assistant", "content": "Please attach a photo."}]
    as_part = read_turn(asked + [photo_message("[Sent a photo]")])
    as_note = read_turn(asked + [{"role": "user", "content": "[Sent a photo]\n[customer attached photo IMG-3F2A "
                                                              "1.2 MB, 1600×1200]"}])
    neither = read_turn(asked + [{"role": "user", "content": "I took a photo but cannot attach it"}])
    assert (as_part.photos, as_part.photo_now) == (1, True)
    assert (as_note.photos, as_note.photo_now) == (1, True)
    assert (neither.photos, neither.photo_now) == (0, False)
