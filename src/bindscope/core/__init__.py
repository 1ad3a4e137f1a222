"""Layer 1 (the bottom): errors, atomic files, validated settings, devices, figures, the version."""
