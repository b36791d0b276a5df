"""The model stand-in: an OpenAI-compatible chat-completions server playing Sundry's support scenarios.

It imports no Django and nothing from `support`. Start it with `python -m standin --port 8001`, or in a
thread with `standin.server.start_in_thread()`. standin/README.md lists the endpoints and the fault grammar.
"""
