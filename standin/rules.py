"""OpenAI's request rules for chat completions, as one pure function returning OpenAI's own 400 errors.

The texts are OpenAI's, typos included ("preceeding"), so a client that works here fails the same way
against the real API. Parameter paths keep OpenAI's two spellings: `messages.[3].role` for the
conversation-shape checks and `messages[3].content` for per-field checks.
"""

from __future__ import annotations

import re
from typing import Any

ROLES = ("system", "assistant", "user", "function", "tool", "developer")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")

BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
    "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. "
    "If you have trouble figuring out how to fix this, please contact us through our help center at "
    "help.openai.com.)"
)


class Invalid(Exception):
    """One rule broken; carries the fields of OpenAI's error object."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


def error_body(message: str, param: str | None = None, code: str | None = None,
               type_: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def validate_request(body: Any) -> None | tuple[int, dict]:
    """None when OpenAI would accept the request body, else (400, OpenAI's error body)."""
    try:
        _check(body)
    except Invalid as e:
        return 400, error_body(e.message, e.param, e.code)
    return None


def parse_error() -> tuple[int, dict]:
    """The answer to a body that is not JSON at all."""
    return 400, error_body(BAD_JSON)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "an integer",
            float: "a number"}.get(type(value), "an object")


def _missing(path: str) -> Invalid:
    return Invalid(f"Missing required parameter: '{path}'.", path, "missing_required_parameter")


def _wrong_type(path: str, expected: str, value: Any) -> Invalid:
    return Invalid(f"Invalid type for '{path}': expected {expected}, but got {_type_name(value)} instead.",
                   path, "invalid_type")


def _check(body: Any) -> None:
    if not isinstance(body, dict):
        raise Invalid(BAD_JSON)
    if not body.get("model"):
        raise Invalid("you must provide a model parameter")
    if "messages" not in body:
        raise _missing("messages")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _wrong_type("messages", "an array of objects", messages)
    if not messages:
        raise Invalid("[] is too short - 'messages'", "messages", "empty_array")
    for i, message in enumerate(messages):
        _check_message(i, message)
    _check_tool_pairing(messages)
    _check_tools(body)
    if body.get("stream_options") is not None and not body.get("stream"):
        raise Invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options")


def _check_content(i: int, message: dict, required: bool) -> None:
    content = message.get("content")
    if "content" not in message and required:
        raise _missing(f"messages[{i}].content")
    if content is None:
        if required:
            raise Invalid("Invalid value for 'content': expected a string, got null.", f"messages.[{i}].content")
        return
    if not isinstance(content, (str, list)):
        raise _wrong_type(f"messages[{i}].content", "one of a string or array of objects", content)
    if isinstance(content, list):
        for k, part in enumerate(content):
            _check_part(i, k, message.get("role"), part)


PART_TYPES = ("text", "image_url", "input_audio", "refusal", "audio", "file")
DATA_URL = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}")


def _check_part(i: int, k: int, role: Any, part: Any) -> None:
    """One part of a content array: text, or (in a user message) an image by URL or as a data URL."""
    path = f"messages[{i}].content[{k}]"
    if not isinstance(part, dict):
        raise _wrong_type(path, "an object", part)
    kind = part.get("type")
    if kind not in PART_TYPES:
        supported = ", ".join(f"'{t}'" for t in PART_TYPES[:-1]) + f", and '{PART_TYPES[-1]}'"
        raise Invalid(f"Invalid value: '{kind}'. Supported values are: {supported}.", f"{path}.type", "invalid_value")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise _missing(f"{path}.text") if "text" not in part else _wrong_type(f"{path}.text", "a string",
                                                                                 part.get("text"))
    elif kind == "image_url":
        if role != "user":
            raise Invalid(f"Image URLs are only allowed for messages with role 'user', but this message with role "
                          f"'{role}' contains an image URL.", f"messages.[{i}].content.[{k}].type")
        image = part.get("image_url")
        if not isinstance(image, dict) or "url" not in image:
            raise _missing(f"{path}.image_url.url")
        url = image["url"]
        if not isinstance(url, str):
            raise _wrong_type(f"{path}.image_url.url", "a string", url)
        if url.startswith("data:") and not DATA_URL.fullmatch(url):
            raise Invalid(f"Invalid '{path}.image_url.url'. Expected a base64-encoded data URL with an image MIME "
                          "type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an invalid "
                          "base64-encoded string.", f"{path}.image_url.url", "invalid_value")
        if not url.startswith(("data:", "http://", "https://")):
            raise Invalid(f"Invalid '{path}.image_url.url'. Expected a valid URL, but got a value with an invalid "
                          "format.", f"{path}.image_url.url", "invalid_value")
        if image.get("detail", "auto") not in ("auto", "low", "high"):
            raise Invalid(f"Invalid value: '{image.get('detail')}'. Supported values are: 'auto', 'low', and "
                          "'high'.", f"{path}.image_url.detail", "invalid_value")


def _check_message(i: int, message: Any) -> None:
    if not isinstance(message, dict):
        raise _wrong_type(f"messages[{i}]", "an object", message)
    if "role" not in message:
        raise _missing(f"messages[{i}].role")
    role = message["role"]
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        raise Invalid(f"Invalid value: '{role}'. Supported values are: {supported}.",
                      f"messages[{i}].role", "invalid_value")
    if role == "tool":
        if "tool_call_id" not in message or message["tool_call_id"] is None:
            raise _missing(f"messages[{i}].tool_call_id")
        if not isinstance(message["tool_call_id"], str):
            raise _wrong_type(f"messages[{i}].tool_call_id", "a string", message["tool_call_id"])
        _check_content(i, message, required=True)
    elif role == "assistant":
        calls = message.get("tool_calls")
        if calls is not None:
            _check_calls(i, calls)
        _check_content(i, message, required=not calls and not message.get("function_call"))
    elif role != "function":
        _check_content(i, message, required=True)


def _check_calls(i: int, calls: Any) -> None:
    path = f"messages[{i}].tool_calls"
    if not isinstance(calls, list):
        raise _wrong_type(path, "an array of objects", calls)
    if not calls:
        raise Invalid(f"Invalid '{path}': empty array. Expected an array with minimum length 1, "
                      "but got an empty array instead.", path, "empty_array")
    for j, call in enumerate(calls):
        where = f"{path}[{j}]"
        if not isinstance(call, dict):
            raise _wrong_type(where, "an object", call)
        for key in ("id", "type", "function"):
            if key not in call or call[key] is None:
                raise _missing(f"{where}.{key}")
        if not isinstance(call["id"], str):
            raise _wrong_type(f"{where}.id", "a string", call["id"])
        if call["type"] != "function":
            raise Invalid(f"Invalid value: '{call['type']}'. Supported values are: 'function'.",
                          f"{where}.type", "invalid_value")
        function = call["function"]
        if not isinstance(function, dict):
            raise _wrong_type(f"{where}.function", "an object", function)
        for key in ("name", "arguments"):
            if key not in function or function[key] is None:
                raise _missing(f"{where}.function.{key}")
            if not isinstance(function[key], str):
                # The classic bug: the parsed arguments dict sent back instead of the model's string.
                raise _wrong_type(f"{where}.function.{key}", "a string", function[key])


def _check_tool_pairing(messages: list) -> None:
    """Every tool message answers a call of the assistant message that opens its block, and
    every call of such a message is answered before anything else is said."""
    open_ids: list[str] = []  # calls of the current block still owed a tool message
    block_ids: set[str] = set()
    block_at = -1
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if block_at < 0:
                raise Invalid("Invalid parameter: messages with role 'tool' must be a response to a "
                              "preceeding message with 'tool_calls'.", f"messages.[{i}].role")
            call_id = message["tool_call_id"]
            if call_id not in block_ids:
                raise Invalid(f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' "
                              "of previous message.", f"messages.[{i}].tool_call_id")
            if call_id in open_ids:
                open_ids.remove(call_id)
            continue
        _close_block(open_ids, block_at)
        if role == "assistant" and message.get("tool_calls"):
            open_ids = [c["id"] for c in message["tool_calls"]]
            block_ids, block_at = set(open_ids), i
        else:
            open_ids, block_ids, block_at = [], set(), -1
    _close_block(open_ids, block_at)


def _close_block(open_ids: list[str], block_at: int) -> None:
    if open_ids:
        raise Invalid("An assistant message with 'tool_calls' must be followed by tool messages responding "
                      "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                      + ", ".join(open_ids), f"messages.[{block_at}].role")


def _check_tools(body: dict) -> None:
    tools = body.get("tools")
    if tools is None:
        if body.get("tool_choice") is not None:
            raise Invalid("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                          "specified.", "tool_choice")
        return
    if not isinstance(tools, list):
        raise _wrong_type("tools", "an array of objects", tools)
    for k, tool in enumerate(tools):
        where = f"tools[{k}]"
        if not isinstance(tool, dict):
            raise _wrong_type(where, "an object", tool)
        if "type" not in tool:
            raise _missing(f"{where}.type")
        if tool["type"] != "function":
            raise Invalid(f"Invalid value: '{tool['type']}'. Supported values are: 'function' and 'custom'.",
                          f"{where}.type", "invalid_value")
        function = tool.get("function")
        if function is None:
            raise _missing(f"{where}.function")
        if not isinstance(function, dict):
            raise _wrong_type(f"{where}.function", "an object", function)
        _check_tool_name(f"{where}.function.name", function.get("name"))
        params = function.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise _wrong_type(f"{where}.function.parameters", "an object", params)


def _check_tool_name(path: str, name: Any) -> None:
    if name is None:
        raise _missing(path)
    if not isinstance(name, str):
        raise _wrong_type(path, "a string", name)
    if not name:
        raise Invalid(f"Invalid '{path}': empty string. Expected a string with minimum length 1, but got an "
                      "empty string instead.", path, "empty_string")
    if len(name) > 64:
        raise Invalid(f"Invalid '{path}': string too long. Expected a string with maximum length 64, but got "
                      f"a string with length {len(name)} instead.", path, "string_above_max_length")
    if not TOOL_NAME.match(name):
        raise Invalid(f"Invalid '{path}': string does not match pattern. Expected a string that matches the "
                      "pattern '^[a-zA-Z0-9_-]+$'.", path, "invalid_value")
