"""Layer 2: concept spaces and scene sets, captions, splits and planted embeddings (pure, no files but split JSON)."""
