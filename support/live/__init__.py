"""Live events: their shapes, the channel layer, publishing after commit."""
