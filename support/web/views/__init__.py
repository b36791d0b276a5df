"""The JSON API: the customer's widget (customer.py) and the staff console (staff.py)."""
