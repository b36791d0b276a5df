"""The password hasher of the test process: Django's PBKDF2, with 1,000 rounds instead of a million.

Every staff member a test makes gets a password, and every login checks one: at a million rounds each costs
about 0.2 s of CPU. The hash keeps PBKDF2's name and states its rounds, so a site or worker process a test starts
(with Django's default hashers) checks these passwords as they are, and would only re-hash one at login."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1000
