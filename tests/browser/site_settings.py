"""The settings of the site the browser tests start (daphne, the Celery worker, this process): the project's own,
with passwords hashed with PBKDF2 at 1,000 rounds (tests/hashers.py). Every staff login of a browser test checks a
password, about 100 of them, each 0.24 s of daphne's CPU at a million rounds; what is hashed is not what these
tests test."""

from django.conf import global_settings

from agentsite.settings import *  # noqa: F403  (the project's settings, as they are)

PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *global_settings.PASSWORD_HASHERS]
