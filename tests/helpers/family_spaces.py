"""Small relation and count spaces shared by the family known-answer tests (docs/method/11-relations-counts.md):
3 x 3 objects under the four relations (324 scenes), and 3 x 3 objects at counts 1 to 3, no identical pair."""

from __future__ import annotations

from bindscope.data.presets import TEXT_ATTRIBUTES, TEXT_NOUNS

RELATION = {
    "name": "text-rel-small",
    "concepts": {"attribute": TEXT_ATTRIBUTES[:3], "noun": TEXT_NOUNS[:3]},
    "objects_per_scene": 2,
    "relations": ["left of", "right of", "above", "below"],
    "caption": {"object": "a {attribute} {noun}"},
    "noun": "noun",
}
COUNTS = {
    "name": "count-small",
    "concepts": {"color": ["red", "blue", "green"], "shape": ["cube", "ball", "cone"]},
    "objects_per_scene": 2,
    "counts": [1, 2, 3],
    "scenes": {"allow_identical": False},
    "caption": {"object": "{count} {color} {shape}"},
    "noun": "shape",
}
