"""The settings of ``decompose``: the probe settings of the subtraction runs, the held-out share of scenes for
R², and whether a subtraction residual keeps the embeddings' mean."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from bindscope.estimators.probe_runs import ProbeSettings
from bindscope.space.splits import check_fraction


class DecomposeSettings(ProbeSettings):
    """The probe settings of the subtraction runs, the held-out share of scenes for R², and whether a
    subtraction residual keeps the embeddings' mean.

    ``residual_mean``: ``keep`` (the research code) subtracts only the model's deviation from
    the mean, so the residual keeps the mean embedding ȳ of the scenes used; ``remove`` subtracts
    the whole fit, intercept included, leaving residuals of mean 0 (docs/method/04-decomposition.md).
    """

    PAPER: ClassVar[dict[str, Any]] = {**ProbeSettings.PAPER, "residual_mean": "keep", "test_fraction": 0.01}
    test_fraction: float = Field(0.2, description="Held-out share of scenes for R² (0.2; the paper: 0.01).")
    residual_mean: Literal["keep", "remove"] = Field(
        "keep",
        description="keep (default, as the research code): a subtraction residual keeps the mean embedding; "
        "remove: the intercept is subtracted too (residual mean 0).",
    )

    @field_validator("test_fraction")
    @classmethod
    def _test_fraction(cls, v: float) -> float:
        return check_fraction(v, "test fraction")
