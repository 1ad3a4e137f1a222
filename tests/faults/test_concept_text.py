"""Concept names, values and caption text holding a newline, a NUL or another control character (issue 54).

They would end up in captions and CSV cells, so they are refused where they are declared: a concept space, a
preset (built-in or YAML), a caption template. Printable text of any script is taken.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import preset_from_dict
from bindscope.space.concepts import ConceptSpace
from cli_checks import assert_one_line_error
from folders import snapshot

PRINTABLE = "which is not printable; use printable text (no newline, tab, NUL or other control character)"
BAD = {
    "newline": ("re\nd", "'re\\nd'", "'\\n'"),
    "nul": ("a\x00b", "'a\\x00b'", "'\\x00'"),
    "tab": ("\tx", "'\\tx'", "'\\t'"),
}
BAD |= {"bell": ("x\x07", "'x\\x07'", "'\\x07'"), "line-separator": ("x\u2028y", "'x\\u2028y'", "'\\u2028'")}


@pytest.mark.parametrize("case", list(BAD))
def test_a_concept_value_or_name_with_a_control_character(case: str) -> None:
    text, shown, char = BAD[case]
    with pytest.raises(BindscopeError) as value:
        ConceptSpace.from_dict({"color": ["blue", text], "shape": ["cube"]})
    assert str(value.value) == f"value of concept 'color' {shown} holds {char}, {PRINTABLE}"
    with pytest.raises(BindscopeError) as name:
        ConceptSpace.from_dict({text: ["blue"]})
    assert str(name.value) == f"concept name {shown} holds {char}, {PRINTABLE}"


def test_printable_text_of_any_script_is_taken() -> None:
    space = ConceptSpace.from_dict({"couleur": ["bleu clair", "rouge-orangé", "红色"], "forme": ["cube (grand)"]})
    assert space.values[0] == ("bleu clair", "rouge-orangé", "红色")


@pytest.mark.parametrize(
    ("caption", "message"),
    [
        ({"object": "a {color}\n{shape}"}, f"caption.object: text 'a {{color}}\\n{{shape}}' holds '\\n', {PRINTABLE}"),
        ({"object": "a {color} {shape}", "joiner": "\x00"}, f"caption.joiner: text '\\x00' holds '\\x00', {PRINTABLE}"),
        (
            {"object": "a {color} {shape}", "words": {"color": {"red": "re\rd"}}},
            f"caption.words: word for color value 'red' 're\\rd' holds '\\r', {PRINTABLE}",
        ),
    ],
)
def test_caption_text_with_a_control_character(caption: dict, message: str) -> None:
    data = {"name": "p", "concepts": {"color": ["red"], "shape": ["cube"]}, "objects_per_scene": 1, "caption": caption}
    with pytest.raises(BindscopeError) as refused:
        preset_from_dict(data, origin="preset p")
    assert str(refused.value) == f"invalid preset p: {message}"


def test_dataset_build_refuses_a_preset_file_with_a_newline_in_a_value(run_cli, tmp_path: Path) -> None:
    """The real command: one line naming the value, exit status 1, the YAML intact and no dataset folder."""
    preset = tmp_path / "lines.yaml"
    preset.write_text('name: lines\nconcepts: {color: ["re\\nd", blue], shape: [square]}\nobjects_per_scene: 2\n')
    before = snapshot(tmp_path)
    done = run_cli("dataset", "build", preset, "--out", tmp_path / "data" / "lines", "-q")
    message = f"invalid preset file {preset}: value of concept 'color' 're\\nd' holds '\\n', {PRINTABLE}"
    assert_one_line_error(done, message)
    assert done.stderr.strip() == f"error: {message}"
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "data").exists()
