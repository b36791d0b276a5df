"""The agent loop and its types: pure Python, no Django (tests/test_agent_imports.py enforces it)."""
