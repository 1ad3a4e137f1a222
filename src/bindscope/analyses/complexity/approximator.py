"""One approximator as a scikit-learn style estimator, fitted as the sweep fits each of its models
(docs/method/06-complexity.md), with the sweep's settings."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.complexity.families import Family, Layout
from bindscope.analyses.complexity.fitters.adam import fit_stack
from bindscope.analyses.complexity.fitters.als import fit_stack_exact
from bindscope.analyses.complexity.fitters.stack import SceneIndex, StackFit, predict_stack
from bindscope.analyses.complexity.settings import ComplexitySettings
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import carve_validation


class Approximator:
    """One approximator as an estimator: ``fit(scenes, y)``, ``predict(scenes)``.

    Parameters
    ----------
    family
        ``"additive"``, ``"mult"``, ``"mult_within_object"``, ``"sum_mult"``, ``"mlp"`` (the first of
        ``settings.hidden`` wide) or ``"mlp(H)"``.
    settings
        How it is fitted, the sweep's knobs (default: their defaults): the budget's protocol and schedule
        (``exact``, the default as in ``bindscope complexity``: alternating exact least squares for the table
        families, at most ``budget.sweeps`` sweeps, and Adam on standardised targets with cosine decay for the MLP;
        ``paper``, e.g. ``resolve_budget("paper", epochs=1500)``: full-batch Adam on raw targets at a constant
        learning rate for every family, as the research code), ``lr``, the table ``width`` (None: the embedding
        width), ``validation_fraction`` (held out for selection when ``fit`` gets no validation set), ``device``.
        The settings' lists (approximators, fractions, seeds) play no part.
    seed
        Seed of the initialisation and of the held-out share.

    Attributes
    ----------
    best_epoch_, epochs_run_
        Epochs (Adam) or sweeps (ALS) before the selected checkpoint, and in all.
    best_val_mse_
        The selected checkpoint's validation MSE.
    converged_, unfinished_r2_
        Whether the fit converged, and the R² its training loss's recent fall would still gain.
    """

    def __init__(self, family: str = "additive", settings: ComplexitySettings | None = None, *, seed: int = 0) -> None:
        self.family = family
        self.settings = ComplexitySettings() if settings is None else settings
        self.seed = seed

    def fit(
        self, scenes: SceneSet, y: np.ndarray, validation: tuple[SceneSet, np.ndarray] | None = None
    ) -> Approximator:
        """Fit on ``scenes`` and their embeddings ``y`` ``[N, D]``; keep the best validation checkpoint."""
        y = np.asarray(y, dtype=np.float32)
        if y.ndim != 2 or len(y) != len(scenes):
            raise BindscopeError(f"y must be [{len(scenes)}, D], got {y.shape}")
        self.family_ = Family.parse(self.family, self.settings.hidden[0])
        if validation is None:
            fit_idx, val_idx = carve_validation(
                np.arange(len(scenes)), self.settings.validation_fraction, self.seed, min_count=1
            )
            all_scenes, all_y = scenes, y
        else:
            all_scenes = scenes.concat(validation[0])
            all_y = np.concatenate([y, np.asarray(validation[1], dtype=np.float32)])
            fit_idx, val_idx = np.arange(len(scenes)), np.arange(len(scenes), len(all_scenes))
        self.layout_ = Layout.of(all_scenes)
        self.width_ = self.settings.width or y.shape[1]
        data = SceneIndex.of(all_scenes, all_y, self.settings.device)
        self._keep(self._fit(data, [fit_idx], [val_idx]))
        return self

    def _fit(self, data: SceneIndex, train: list[np.ndarray], validation: list[np.ndarray]) -> StackFit:
        """A stack of one, fitted as the sweep fits each model under the settings' protocol."""
        s, family, seeds = self.settings, self.family_, [self.seed]
        if s.exact(family):
            return fit_stack_exact(family, self.layout_, data, train, validation, seeds, s.solver(), width=self.width_)
        return fit_stack(family, self.layout_, data, train, validation, seeds, s.schedule(), width=self.width_)

    def _keep(self, fit: StackFit) -> None:
        self.params_ = {k: v[:1] for k, v in fit.selected.items()}
        self.final_params_ = {k: v[:1] for k, v in fit.final.items()}
        self.best_epoch_ = int(fit.best_epoch[0])
        self.epochs_run_ = int(fit.epochs_run[0])
        self.best_val_mse_ = float(fit.best_val_mse[0])
        self.converged_ = bool(fit.converged[0])
        self.unfinished_r2_ = float(fit.unfinished_r2[0])

    def predict(self, scenes: SceneSet, *, final: bool = False) -> np.ndarray:
        """Predicted embeddings ``[N, D]`` (the selected checkpoint, or the final one)."""
        if Layout.of(scenes).sizes != self.layout_.sizes or scenes.max_objects != self.layout_.num_slots:
            raise BindscopeError("these scenes come from a different concept space or K than the fitted ones")
        d = self.params_["b"].shape[-1]
        data = SceneIndex.of(scenes, np.zeros((len(scenes), d), np.float32), self.settings.device)
        params = self.final_params_ if final else self.params_
        return predict_stack(self.family_, params, self.layout_, data, [np.arange(len(scenes))])[0]
