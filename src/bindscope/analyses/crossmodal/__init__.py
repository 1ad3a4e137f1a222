"""Cross-modal binding (docs/method.md §7): swap tests, retrieval, the linear bridge and half-truths."""
