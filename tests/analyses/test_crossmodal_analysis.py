"""The crossmodal analysis end to end on planted arrays."""

from __future__ import annotations

import numpy as np

from bindscope.analyses import AnalysisInputs
from bindscope.analyses.crossmodal.analysis import CrossmodalAnalysis, CrossmodalSettings, crossmodal_analysis
from bindscope.data.presets import get_preset
from bindscope.space.planted import planted_embeddings


def test_rotated_text_is_bag_like_raw_and_bound_after_the_bridge() -> None:
    scenes = get_preset("clevr").build_scenes()
    image = planted_embeddings(scenes, "object_additive", dim=64, seed=0)
    rotation = np.linalg.qr(np.random.default_rng(1).normal(size=(64, 64)))[0]
    text = image @ rotation + 0.01 * np.random.default_rng(2).normal(size=image.shape)
    settings = CrossmodalSettings(fractions=(0.7,), seeds=(0,))
    result = crossmodal_analysis(AnalysisInputs(image, scenes, other=text, noun="shape"), settings)
    t = result.table
    bridged = t[(t.variant == "bridged") & (t.metric == "swap_attribute")]["value"].mean()
    raw = t[(t.variant == "raw") & (t.group == "all") & (t.metric == "swap_attribute")]["value"].mean()
    assert bridged > 0.97 and raw < 0.8
    summary = CrossmodalAnalysis().summarize(result, settings)
    rows = CrossmodalAnalysis().headline(summary)
    assert rows[0][0] == "test" and len({len(r) for r in rows}) == 1
