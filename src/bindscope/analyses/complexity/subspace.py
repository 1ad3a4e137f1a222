"""Where a capped budget fits its models: the embeddings' leading principal subspace, widened until the frozen
probes read the embeddings' part inside it as they read the embeddings (:func:`target_basis`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bindscope.analyses.complexity.fitters.basis import TargetBasis, principal_axes
from bindscope.analyses.complexity.settings import Budget
from bindscope.estimators.probes import ProbeSet, set_separation_correct

#: A capped budget's principal subspace is widened until the probes read the embeddings' part inside it
#: at most this much (object accuracy) below the embeddings themselves.
READ_WITHIN = 0.01


def target_basis(
    y: np.ndarray, budget: Budget, probes: ProbeSet, objects: np.ndarray, read_on: np.ndarray | None = None
) -> tuple[TargetBasis | None, dict[str, Any] | None]:
    """The principal subspace the budget fits in (see :class:`Budget`; None: the embeddings as they
    are) and what it keeps.

    The subspace is widened (doubled) while the frozen probes read the embeddings' part inside it
    more than :data:`READ_WITHIN` worse than the embeddings (object accuracy over the scenes
    ``read_on``, those the probes were not fitted on where known, else every scene): predictions
    confined to it could not otherwise reach the in-distribution line, and f* would read the cap as
    complexity. Small components can carry what the probes read (held-out scenes), or only the
    noise of the probes' own training scenes (which they may have fitted): hence the held-out read.
    """
    if budget.max_target_dims is None:
        return None, None

    on = np.arange(len(y)) if read_on is None or not len(read_on) else read_on

    def read(z: np.ndarray) -> float:
        logits = probes.decision_function(z[on], ["object"])["object"]
        return float(set_separation_correct(logits, objects[on]).mean())

    pca = principal_axes(y)  # fitted once, however often the subspace is widened
    basis = None if pca is None else TargetBasis.leading(pca, budget.target_variance, budget.max_target_dims)
    full = read(y)
    while basis is not None:
        inside = read(basis.within(y))
        if full - inside <= READ_WITHIN:
            return basis, {**basis.describe(), "object_acc": inside, "object_acc_embeddings": full}
        assert pca is not None  # a basis comes from the fitted axes
        basis = TargetBasis.leading(pca, budget.target_variance, budget.max_target_dims, min_dims=2 * basis.dims)
    return None, None
