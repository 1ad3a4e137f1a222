"""Binding-function complexity (docs/method.md §6).

Approximator families, the stacked trainer, the sweep, its analysis and plot.
"""
