"""The staff as a lead manages it from the console: invitations (invitations.py), roles, teams and access
(people.py), and the desk's settings as a lead reads them (desk_settings.py). Above the desk, whose permissions,
socket revocation and presence it reuses; below the way in."""
