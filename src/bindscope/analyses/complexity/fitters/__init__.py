"""Fitting stacks of approximators: the models of a stack share nothing but their tensors (``stack``), in the
embeddings or their principal subspace (``basis``); full-batch Adam (``adam``) or, for the table families under
the exact protocol, alternating least squares (``als``, over ``als_design`` and ``als_tables``)."""
