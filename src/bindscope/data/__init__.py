"""Layer 3: presets, dataset folders, rendering, label checks from pixels, the PUG:SPARE import."""
