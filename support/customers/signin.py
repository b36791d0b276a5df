"""Signing a customer in without the shop's token: an e-mail with one of its order numbers (that order only),
or a one-time code sent to the e-mail (every order).

What a stranger must not get from here, and how:
- Sweeping order numbers. Wrong order numbers are counted per (client address, e-mail), per address and per
  e-mail (support/ops/limits.py). Past any of those limits an order number is refused before anything is
  looked up, right or wrong alike (`403 code_required`: ask for a code); the request sends nothing.
- Locking the owner out. Wrong codes are limited per (address, e-mail) and per address only: an address over
  its limit is refused without its code being checked, and the owner's right code from anywhere else works.
  What is capped per e-mail is the codes sent (SIGNIN_CODE_SENDS_PER_EMAIL an hour).
- Learning who is a customer. Asking for a code does the same work for every address: count the asking
  address (SIGNIN_CODE_REQUESTS_PER_ADDRESS an hour), hand the e-mail to a worker, answer 202. The worker
  (support.tasks.send_signin_code) looks the customer up and mails. A wrong code looks nothing up either.
Every failed or refused attempt is also tallied, never to refuse, for an alert on persistent guessing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import time
import uuid

import redis
from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string

from agentsite.celery import app
from support.customers import faces, identity
from support.models import Customer
from support.ops import limits, metrics
from support.shop import port

log = logging.getLogger(__name__)
security_log = logging.getLogger("support.security")

CODE_DIGITS = 8
_CODE = re.compile(rf"[0-9]{{{CODE_DIGITS}}}")
_REQUEST_ID = re.compile(r"[0-9a-f]{32}")
SEND_CODE_TASK = "support.tasks.send_signin_code"  # named, not imported: the tasks import this module

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


class TooMany(Exception):
    """Over a limit of this address: nothing was checked; `retry_after` is the seconds until there is room."""

    def __init__(self, retry_after: int):
        super().__init__(retry_after)
        self.retry_after = retry_after


class TooManyCodes(TooMany):
    """Too many wrong codes from this address (at this e-mail, or at any)."""


class TooManyCodeRequests(TooMany):
    """Too many codes asked for from this address."""


# -- signing in ---------------------------------------------------------------------------------------

def by_order(*, email: str, order_number: str, address: str) -> port.Order:
    """The order proven by its number and e-mail (both canonical), or WrongOrder / CodeRequired.

    The guess is counted before the look-up, in one atomic step with the check, and taken back when it was
    right: thirty guesses at once are thirty guesses, never thirty that each saw room for one more. Past a
    limit nothing is looked up and nothing is sent, so a right guess and a wrong one cost and answer the same."""
    guesses = limits.signin_guesses("order", address, email)
    try:
        attempt = limits.hit(*guesses)
    except limits.Limited:
        _failed(address, email)
        raise CodeRequired from None
    order = identity.order_of(email, order_number)
    if order is None:
        _failed(address, email)
        raise WrongOrder
    limits.forget(attempt, *guesses)
    return order


def by_code(*, email: str, code: str, address: str) -> Customer:
    """The customer a valid code was sent to, or WrongCode / TooManyCodes. Wrong codes are counted per address
    and e-mail and per address (apart from order numbers); an address past either is refused without its code
    being checked. The customer is looked up only once the code proved valid."""
    guesses = limits.signin_guesses("code", address, email)
    try:
        attempt = limits.hit(*guesses)
    except limits.Limited as over:
        _failed(address, email)
        raise TooManyCodes(over.retry_after) from None
    if not isinstance(code, str) or not _CODE.fullmatch(code.strip()) or not _use_code(email, code.strip()):
        _failed(address, email)
        raise WrongCode
    customer = identity.customer_by_email(email)
    if customer is None:  # a customer the shop no longer has
        raise WrongCode
    limits.forget(attempt, *guesses)
    return customer


def _use_code(email: str, code: str) -> bool:
    try:
        return bool(limits.store().eval(_USE_CODE, 1, _codes_key(email), _digest(email, code), _now_ms()))
    except redis.RedisError as error:
        raise limits.Unavailable(str(error)) from error


def _failed(address: str, email: str) -> None:
    """A failed or refused sign-in, tallied per e-mail and per address for the alert, never to refuse: the
    attempt that brings either to SIGNIN_GUESSING_ALERT_PER_HOUR within its hour is logged at ERROR and
    counted in desk_signin_guessing_alerts_total, once per hour each."""
    watched = limits.signin_failures_watched(address, email)
    try:
        counts = limits.tally(*watched)
    except limits.Unavailable as error:
        limits.warn_unavailable("failed sign-ins not tallied", error)
        return
    for counted_per, limit, count in zip(("email", "address"), watched, counts):
        if count == limit.count:
            whose = f"for e-mail {email_digest(email)}" if counted_per == "email" else f"from {address}"
            security_log.error("persistent sign-in guessing: %d failed sign-ins within an hour %s", count, whose)
            metrics.signin_guessing(counted_per)


def email_digest(email: str) -> str:
    """How logs name an e-mail address: a digest (the log carries no address book), the same in every line."""
    return hashlib.sha256(email.encode()).hexdigest()[:16]


# -- codes: asked for in the request, sent by a worker --------------------------------------------------

def request_code(*, email: str, address: str) -> None:
    """Ask for a code to be e-mailed to `email`: TooManyCodeRequests past this address's limit, else handed to
    a worker. The same work whatever the address is (nothing is looked up here), so the answer and its time
    tell no one who is a customer. Raises limits.Unavailable when Redis (the limits or the broker) is away."""
    try:
        limits.hit(limits.code_requests_from(address))
    except limits.Limited as over:
        raise TooManyCodeRequests(over.retry_after) from None
    queue_code(email)


def queue_code(email: str) -> None:
    """Hand the sending to a worker. The e-mail stays out of the worker's log lines (argsrepr); a request
    older than a code's lifetime is dropped rather than sent late."""
    try:
        app.send_task(SEND_CODE_TASK, args=[email, uuid.uuid4().hex], argsrepr="('<e-mail>', '<request>')",
                      expires=settings.SIGNIN_CODE_TTL)
    except Exception as error:  # kombu's OperationalError once its publish retries are spent, or worse
        raise limits.Unavailable(f"the sign-in code could not be queued: {error}") from error


def send_code(email: str, request_id: str) -> None:
    """The worker's part: e-mail a fresh code to the customer with that address, if there is one and it has not
    had SIGNIN_CODE_SENDS_PER_EMAIL codes this hour. The cap is counted here, so a redelivered task never sends
    more; one that finds its request already served sends nothing at all."""
    if not isinstance(email, str) or not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
        log.warning("sign-in code task with malformed arguments ignored")
        return
    served = limits.KEY_PREFIX + "signin:code-request-served:" + request_id
    try:
        if limits.store().exists(served):
            return
    except redis.RedisError as error:
        raise limits.Unavailable(str(error)) from error
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
    context = {"customer": customer, "code": code, "minutes": settings.SIGNIN_CODE_TTL // 60,
               **faces.email_context()}
    try:
        send_mail(subject=render_to_string("support/email/signin_code_subject.txt", context).strip(),
                  message=render_to_string("support/email/signin_code.txt", context),
                  from_email=faces.sender(), recipient_list=[customer.email])
    except Exception:  # the mail server is down or refused: the customer can ask again
        log.exception("sign-in code for customer %s not sent", customer.pk)
        return
    try:
        limits.store().set(served, 1, ex=settings.SIGNIN_CODE_TTL)
    except redis.RedisError:
        log.warning("sign-in code request not marked as served; a redelivery may send one more code")


def _codes_key(email: str) -> str:
    return limits.KEY_PREFIX + "signin:codes:" + hashlib.sha256(email.encode()).hexdigest()[:32]


def _digest(email: str, code: str) -> str:
    # Codes are kept as keyed digests: whoever reads Redis cannot sign in with what is there.
    return hmac.new(settings.SECRET_KEY.encode(), f"{email}:{code}".encode(), hashlib.sha256).hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)
