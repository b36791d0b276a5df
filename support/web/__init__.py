"""The way in over HTTP and websockets: views, urls, consumers, middleware."""
