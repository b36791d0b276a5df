"""The customer's way in: identity, sign-in, links, attachments, notifications and e-mail."""
