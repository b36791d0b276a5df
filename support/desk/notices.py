"""What the desk itself tells the customer when the agent hands the conversation over, in plain words."""

from django.utils.translation import gettext_lazy as _

# What the customer is told, once, when the agent hands the conversation to a person (saved as an assistant
# message by the system author: the model reads it as said, the customer sees it as a notice). Nobody has
# joined yet, so it promises a reply, not a person in the chat; "X has joined" comes with the take-over.
# Written in the conversation's language (languages.say; catalogues in support/locale/).
ESCALATED = _("I've passed this to our support team. A member of our team will reply here.")
STOPPED = _("I couldn't finish this on my own, so I've passed it to our support team. "
            "A member of our team will reply here.")
# The shop's systems did not answer (stop reason tool_unavailable): said by the desk, not guessed by the model.
SHOP_AWAY = _("I can't reach our order system right now, so I've passed this to our support team. "
              "A member of our team will reply here.")
