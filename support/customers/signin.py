"""Signing a customer in without the shop's token: an e-mail with one of its order numbers (that order only),
or a one-time code sent to the e-mail (every order).

Wrong guesses are counted per (client address, e-mail), per address and per e-mail (support/ops/limits.py).
Past any of those limits an order number alone no longer signs anyone in: the answer is "enter the code we
e-mailed", and a code is sent only when the order was right. So a stranger's guesses never lock the owner
out (the owner gets the code), and they learn nothing from the answer, right or wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import time

import redis
from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string

from support.customers import identity
from support.models import Customer
from support.ops import limits
from support.shop import port

log = logging.getLogger(__name__)

CODE_DIGITS = 8
_CODE = re.compile(rf"[0-9]{{{CODE_DIGITS}}}")

# KEYS[1]: an e-mail's codes (digest -> expiry in ms). ARGV: the digest tried, now in ms.
# A valid code is used once: the set goes with it, so every code sent before is spent as well.
_USE_CODE = """
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if expires and tonumber(expires) > tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""


class CodeRequired(Exception):
    """Too many wrong guesses at this e-mail or from here: only a code sent to the e-mail signs in now."""


class WrongOrder(Exception):
    """No such order for that e-mail (a missing order and someone else's look the same)."""


class WrongCode(Exception):
    """Not a valid code for that e-mail (wrong, expired or used)."""


class TooManyCodes(Exception):
    def __init__(self, retry_after: int):
        super().__init__(retry_after)
        self.retry_after = retry_after


def by_order(*, email: str, order_number: str, address: str) -> port.Order:
    """The order proven by its number and e-mail (both canonical), or WrongOrder / CodeRequired.

    The guess is counted before the look-up, in one atomic step with the check, and taken back when it was
    right: thirty guesses at once are thirty guesses, never thirty that each saw room for one more."""
    guesses = limits.signin_guesses("order", address, email)
    try:
        attempt = limits.hit(*guesses)
    except limits.Limited:
        order = identity.order_of(email, order_number)
        if order is not None:
            send_code(email)  # the owner gets in by the code; a stranger who guessed right has no inbox
        raise CodeRequired from None
    order = identity.order_of(email, order_number)
    if order is None:
        raise WrongOrder
    limits.forget(attempt, *guesses)
    return order


def by_code(*, email: str, code: str, address: str) -> Customer:
    """The customer a valid code was sent to, or WrongCode / TooManyCodes. Wrong codes are counted like wrong
    order numbers, apart from them; past a limit, codes are refused for the Retry-After."""
    guesses = limits.signin_guesses("code", address, email)
    try:
        attempt = limits.hit(*guesses)
    except limits.Limited as over:
        raise TooManyCodes(over.retry_after) from None
    customer = identity.customer_by_email(email)
    if customer is None or not isinstance(code, str) or not _CODE.fullmatch(code.strip()):
        raise WrongCode
    try:
        used = limits.store().eval(_USE_CODE, 1, _codes_key(email), _digest(email, code.strip()), _now_ms())
    except redis.RedisError as error:
        raise limits.Unavailable(str(error)) from error
    if not used:
        raise WrongCode
    limits.forget(attempt, *guesses)
    return customer


def send_code(email: str) -> None:
    """E-mail a fresh code to the customer with that address, if there is one and it has not had
    SIGNIN_CODE_SENDS_PER_EMAIL codes this hour. Says nothing either way: who is a customer stays unknown."""
    customer = identity.customer_by_email(email)
    if customer is None:
        return
    try:
        limits.hit(limits.code_sends_to(email))
    except limits.Limited:
        return  # enough codes are on their way; any of them still works
    code = f"{secrets.randbelow(10 ** CODE_DIGITS):0{CODE_DIGITS}d}"
    ttl_ms = settings.SIGNIN_CODE_TTL * 1000
    key, now = _codes_key(email), _now_ms()
    try:
        pipe = limits.store().pipeline()
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zadd(key, {_digest(email, code): now + ttl_ms})
        pipe.pexpire(key, ttl_ms)
        pipe.execute()
    except redis.RedisError as error:
        raise limits.Unavailable(str(error)) from error
    context = {"customer": customer, "code": code, "minutes": settings.SIGNIN_CODE_TTL // 60}
    try:
        send_mail(subject=render_to_string("support/email/signin_code_subject.txt", context).strip(),
                  message=render_to_string("support/email/signin_code.txt", context),
                  from_email=None, recipient_list=[customer.email])
    except Exception:  # the mail server is down or refused: the customer can ask again
        log.exception("sign-in code for customer %s not sent", customer.pk)


def _codes_key(email: str) -> str:
    return limits.KEY_PREFIX + "signin:codes:" + hashlib.sha256(email.encode()).hexdigest()[:32]


def _digest(email: str, code: str) -> str:
    # Codes are kept as keyed digests: whoever reads Redis cannot sign in with what is there.
    return hmac.new(settings.SECRET_KEY.encode(), f"{email}:{code}".encode(), hashlib.sha256).hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)
