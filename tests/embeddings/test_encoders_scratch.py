"""The encoders compute the last block at the EOS token only: the same outputs and gradients as
running every block on every position and reading the EOS row."""

from __future__ import annotations

import pytest
import torch

from bindscope.embeddings.encoders.scratch.model import DualEncoder, SequenceEncoder, build_model
from bindscope.embeddings.encoders.scratch.vocabulary import Vocabulary
from bindscope.scratch.config import load_config
from bindscope.scratch.data import SceneSampler

TINY = {"d_model": 32, "ff": 64, "heads": 4, "d_out": 8, "layers": 3}


def every_position(encoder: SequenceEncoder, tokens: torch.Tensor, layer: int | None = None) -> torch.Tensor:
    """The reference: each block on the whole sequence, the final norm, then the EOS row."""
    x = encoder.embed(tokens) + encoder.positions[: tokens.shape[1]]
    padding = tokens == encoder.vocab.pad
    for block in encoder.blocks.layers[: len(encoder.blocks.layers) if layer is None else layer]:
        x = block(x, src_key_padding_mask=padding)
    if layer is None and encoder.blocks.norm is not None:
        x = encoder.blocks.norm(x)
    return x[torch.arange(len(tokens)), (tokens == encoder.vocab.eos).float().argmax(1)]


def tiny_model(**overrides) -> tuple[DualEncoder, torch.Tensor, torch.Tensor]:
    cfg = load_config("cpu-small", **TINY, **overrides)
    space = cfg.preset().space
    vocab = Vocabulary.for_space(space, cfg.max_objects)
    model = build_model(cfg, vocab)
    batch = SceneSampler(space, torch.arange(space.num_objects).numpy(), cfg.max_objects).sample(64, 0, 0)
    return model, vocab.scene_tokens(batch.scenes), vocab.object_queries(torch.from_numpy(space.all_objects())[:30])


@pytest.mark.parametrize(
    "overrides", [{}, {"final_norm": False, "init": "xavier"}, {"ff_activation": "swiglu"}, {"shared_encoder": True}]
)
@pytest.mark.parametrize("layer", [None, 0, 1, 2, 3])
def test_the_eos_only_last_block_matches_every_position(overrides: dict, layer: int | None) -> None:
    torch.manual_seed(0)
    model, scenes, queries = tiny_model(**overrides)
    for encoder, tokens in ((model.scene, scenes), (model.query, queries)):
        with torch.no_grad():
            torch.testing.assert_close(encoder.hidden(tokens, layer), every_position(encoder, tokens, layer))


def test_the_eos_only_last_block_has_the_same_gradients() -> None:
    model, scenes, queries = tiny_model()
    grads = []
    for hidden in (model.scene.hidden, lambda t, layer=None: every_position(model.scene, t, layer)):
        model.zero_grad()
        z = model.scene.head(hidden(scenes))
        (z.square().sum() + z[:, 0].sum()).backward()
        grads.append({n: p.grad.clone() for n, p in model.scene.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name in grads[0]:
        # float32 sums in another order: an entry near zero differs by the tensor's rounding, not its own
        scale = float(grads[1][name].abs().max())
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-6 * max(scale, 1.0), msg=name)


def test_a_shared_encoder_reads_queries_as_one_object_scenes() -> None:
    model, _, queries = tiny_model(shared_encoder=True)  # object queries of the first 30 objects
    assert model.query is model.scene
    assert not any(name.startswith("query.") for name in model.state_dict())
    separate, _, _ = tiny_model()
    assert sum(p.numel() for p in separate.parameters()) > 1.9 * sum(p.numel() for p in model.parameters())
    values = torch.from_numpy(load_config("cpu-small").preset().space.all_objects()[:30])
    with torch.no_grad():
        torch.testing.assert_close(model.query(queries), model.scene(model.vocab.scene_tokens(values[:, None, :])))


def test_swiglu_gates_the_feed_forward_layer() -> None:
    model, _, _ = tiny_model(ff_activation="swiglu")
    block = model.scene.blocks.layers[0]
    assert (block.linear1.out_features, block.linear2.in_features) == (2 * TINY["ff"], TINY["ff"])
    x = torch.randn(5, 2 * TINY["ff"])
    torch.testing.assert_close(block.activation(x), torch.nn.functional.silu(x[:, : TINY["ff"]]) * x[:, TINY["ff"] :])
    assert not block.activation_relu_or_gelu  # PyTorch's fused inference path (ReLU or GELU only) stays off
