"""Layer 7: runs that chain the lower layers (the demo; the run-config pipeline arrives later)."""
