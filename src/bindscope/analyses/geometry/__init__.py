"""Concept geometry (docs/method.md §8): factorization, orthogonality, rank, linear heads, rank axes, MDS."""
