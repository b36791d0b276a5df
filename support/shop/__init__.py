"""The shop behind a port: the interface, its implementations, policy search."""
