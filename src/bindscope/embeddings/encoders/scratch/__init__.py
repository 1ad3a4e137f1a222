"""Controlled models trained from scratch: what loading and running one needs (``scratch:<model folder>``).

``config`` (the training config a model folder records), ``vocabulary`` (its token layout), ``model``
(the dual encoder), ``folder`` (reading a model folder's record and weights) and ``encoder`` (its scene
encoder as a bindscope :class:`~bindscope.embeddings.encoders.base.Encoder`). Training, sweeps and export
(the ``bindscope scratch`` commands) import this package, never the reverse. Nothing is imported here, so
listing the backends imports no torch.
"""
