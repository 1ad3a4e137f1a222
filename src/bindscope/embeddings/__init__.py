"""Layer 4: model specs and encoders, embedding extraction, embedding folders."""
