"""A policy's Markdown as HTML for the console (the preview, a version's text): CommonMark with tables and
strikethrough. Inert whatever the text says: raw HTML is shown as text, links go only to http(s) and mailto
addresses, images are named rather than loaded, and headings start below the page's own.
"""

from __future__ import annotations

import re

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

SAFE_LINK = re.compile(r"^(https?://|mailto:)", re.IGNORECASE)
HEADING_SHIFT = 2  # the page has its h1 (the policy) and an h2 (the section): a policy's "# " is an h3


def _link_open(self, tokens, idx, options, env):
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


def _image(self, tokens, idx, options, env):
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
    return f'<span class="md-image">[image: {escapeHtml(alt) or "no description"}]</span>'


def _heading(self, tokens, idx, options, env):
    token = tokens[idx]
    token.tag = f"h{min(int(token.tag[1]) + HEADING_SHIFT, 6)}"
    return self.renderToken(tokens, idx, options, env)


def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: bool(SAFE_LINK.match(url.strip()))
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    md.add_render_rule("heading_open", _heading)
    md.add_render_rule("heading_close", _heading)
    return md


_MD = _renderer()


def policy_html(text: str) -> SafeString:
    return mark_safe(_MD.render(text))  # escaped by the renderer itself: raw HTML is off, links are checked
