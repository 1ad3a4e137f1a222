"""One approximator as a scikit-learn style estimator, under either fitting protocol (docs/method.md §6)."""

from __future__ import annotations

import numpy as np

from bindscope.analyses.complexity.als import Solver, fit_stack_exact
from bindscope.analyses.complexity.approxfit import PROTOCOLS, SceneIndex, Schedule, StackFit, fit_stack, predict_stack
from bindscope.analyses.complexity.approximators import Family, Layout
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import MAX_WIDTH, check_size
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import carve_validation


class Approximator:
    """One approximator as an estimator: ``fit(scenes, y)``, ``predict(scenes)``.

    Parameters
    ----------
    family
        ``"additive"``, ``"mult"``, ``"mult_within_object"``, ``"sum_mult"``, ``"mlp"`` or
        ``"mlp(H)"``.
    protocol
        ``"exact"`` (the default, as in ``bindscope complexity``): alternating exact least
        squares for the table families (at most ``sweeps`` sweeps, stopped on a validation
        plateau) and Adam on standardised targets, cosine decay, for the MLP. ``"paper"``:
        full-batch Adam on raw targets at a constant learning rate for every family (the
        research code).
    hidden
        MLP width when ``family`` is ``"mlp"`` (the paper: 1024).
    width
        Table width d; None means the embedding width.
    sweeps
        ALS sweeps at most (exact protocol, table families).
    epochs, lr, eval_every, patience
        The Adam schedule (see :class:`~bindscope.analyses.complexity.approxfit.Schedule`): every
        family's under ``paper``, the MLP's under ``exact``; the paper: 4,000 epochs, lr 1e-2.
    validation_fraction
        Share of the training scenes held out for selection when ``fit`` gets no validation set.
    seed
        Seed of the initialisation and of the held-out share.
    device
        Torch device.

    Attributes
    ----------
    best_epoch_, epochs_run_
        Epochs (Adam) or sweeps (ALS) before the selected checkpoint, and in all.
    best_val_mse_
        The selected checkpoint's validation MSE.
    converged_, unfinished_r2_
        Whether the fit converged, and the R² its training loss's recent fall would still gain.
    """

    def __init__(
        self,
        family: str = "additive",
        *,
        protocol: str = "exact",
        hidden: int = 1024,
        width: int | None = None,
        sweeps: int = 800,
        epochs: int = 4000,
        lr: float = 1e-2,
        eval_every: int = 50,
        patience: int | None = None,
        validation_fraction: float = 0.1,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        self.family = family
        self.protocol = protocol
        self.hidden = hidden
        self.width = width
        self.sweeps = sweeps
        self.epochs = epochs
        self.lr = lr
        self.eval_every = eval_every
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.seed = seed
        self.device = device

    def fit(
        self, scenes: SceneSet, y: np.ndarray, validation: tuple[SceneSet, np.ndarray] | None = None
    ) -> Approximator:
        """Fit on ``scenes`` and their embeddings ``y`` ``[N, D]``; keep the best validation checkpoint."""
        if self.protocol not in PROTOCOLS:
            raise BindscopeError(f"unknown protocol {self.protocol!r}; choose {' or '.join(PROTOCOLS)}")
        y = np.asarray(y, dtype=np.float32)
        if y.ndim != 2 or len(y) != len(scenes):
            raise BindscopeError(f"y must be [{len(scenes)}, D], got {y.shape}")
        self.family_ = Family.parse(self.family, self.hidden)
        if self.width is not None:
            check_size(self.width, "width", 1, MAX_WIDTH)
        if validation is None:
            fit_idx, val_idx = carve_validation(
                np.arange(len(scenes)), self.validation_fraction, self.seed, min_count=1
            )
            all_scenes, all_y = scenes, y
        else:
            all_scenes = scenes.concat(validation[0])
            all_y = np.concatenate([y, np.asarray(validation[1], dtype=np.float32)])
            fit_idx, val_idx = np.arange(len(scenes)), np.arange(len(scenes), len(all_scenes))
        self.layout_ = Layout.of(all_scenes)
        self.width_ = self.width or y.shape[1]
        data = SceneIndex.of(all_scenes, all_y, self.device)
        fit = self._fit(data, [fit_idx], [val_idx])
        self.params_ = {k: v[:1] for k, v in fit.selected.items()}
        self.final_params_ = {k: v[:1] for k, v in fit.final.items()}
        self.best_epoch_ = int(fit.best_epoch[0])
        self.epochs_run_ = int(fit.epochs_run[0])
        self.best_val_mse_ = float(fit.best_val_mse[0])
        self.converged_ = bool(fit.converged[0])
        self.unfinished_r2_ = float(fit.unfinished_r2[0])
        return self

    def _fit(self, data: SceneIndex, train: list[np.ndarray], validation: list[np.ndarray]) -> StackFit:
        if self.protocol == "exact" and self.family_.name != "mlp":
            solver = Solver(sweeps=self.sweeps)
            return fit_stack_exact(
                self.family_, self.layout_, data, train, validation, [self.seed], solver, width=self.width_
            )
        exact = self.protocol == "exact"  # the MLP: standardised targets, cosine; paper: raw targets, constant rate
        schedule = Schedule(
            self.epochs,
            self.lr,
            self.eval_every,
            self.patience,
            standardize=exact,
            decay="cosine" if exact else "constant",
        )
        return fit_stack(self.family_, self.layout_, data, train, validation, [self.seed], schedule, width=self.width_)

    def predict(self, scenes: SceneSet, *, final: bool = False) -> np.ndarray:
        """Predicted embeddings ``[N, D]`` (the selected checkpoint, or the final one)."""
        if Layout.of(scenes).sizes != self.layout_.sizes or scenes.max_objects != self.layout_.num_slots:
            raise BindscopeError("these scenes come from a different concept space or K than the fitted ones")
        d = self.params_["b"].shape[-1]
        data = SceneIndex.of(scenes, np.zeros((len(scenes), d), np.float32), self.device)
        params = self.final_params_ if final else self.params_
        return predict_stack(self.family_, params, self.layout_, data, [np.arange(len(scenes))])[0]
