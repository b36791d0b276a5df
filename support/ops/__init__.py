"""Operations: health probes, metrics, log context, rate limits."""
