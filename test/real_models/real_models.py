"""The real models the matrix runs: torchvision CNNs and transformers models, tiny and random.

Each model is built on cpu from a fixed seed (no download: torchvision without weights,
transformers from a small config), so the npu copy and the cpu reference start from the
same weights. Dropout is off (its random masks would differ between eager and compiled
code, which draw random numbers differently), everything else is the libraries' own code.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

import torchvision_schemas

# transformers imports torchvision when it is installed.
torchvision_schemas.define()

BATCH = 2
# 8 images of 64x64: every training batch is one where resnet18's float32 gradients agree
# with float64 ones to 1e-5 (with 4 images one batch differs by 14%, so any two ways of
# computing it differ too); fewer values per channel also make training-mode BatchNorm
# amplify rounding.
IMAGES = 8
IMAGE = (3, 64, 64)
CLASSES = 10
SEQUENCE = 16
VOCAB = 128


@dataclasses.dataclass(frozen=True)
class RealModel:
    """A model of a real library, its inputs and its training loss.

    ``inputs()`` returns cpu tensors: the model's positional arguments, then the target.
    ``output(model_output)`` picks the tensor to compare (logits), ``loss`` the scalar to train.
    """

    name: str
    family: str  # "cnn", "decoder" or "encoder"
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.Generator], tuple[tuple[torch.Tensor, ...], torch.Tensor]]
    output: Callable[[Any], torch.Tensor]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _without_dropout(model: nn.Module) -> nn.Module:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    return model


def _torchvision(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision

        return _without_dropout(getattr(torchvision.models, name)(weights=None, num_classes=CLASSES))

    return build


def _image_batch(gen: torch.Generator) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    x = torch.randn(IMAGES, *IMAGE, generator=gen)
    return (x,), torch.randint(0, CLASSES, (IMAGES,), generator=gen)


def _token_batch(gen: torch.Generator) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    ids = torch.randint(0, VOCAB, (BATCH, SEQUENCE), generator=gen)
    return (ids,), torch.randint(0, VOCAB, (BATCH, SEQUENCE), generator=gen)


# Common tiny sizes: 2 layers, 2 heads of 16, no dropout, no KV cache (plain tensors out).
_TINY = dict(vocab_size=VOCAB, use_cache=False)


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, **_TINY)
    return GPT2LMHeadModel(config)


def _bert() -> nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        **_TINY)
    return BertForMaskedLM(config)


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=64, attention_dropout=0.0, **_TINY)
    return LlamaForCausalLM(config)


def _logits(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _token_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


MODELS: dict[str, RealModel] = {
    m.name: m
    for m in (
        RealModel("resnet18", "cnn", _torchvision("resnet18"), _image_batch, _logits, F.cross_entropy),
        RealModel("mobilenet_v3_small", "cnn", _torchvision("mobilenet_v3_small"), _image_batch, _logits,
                  F.cross_entropy),
        RealModel("gpt2", "decoder", _gpt2, _token_batch, _logits, _token_loss),
        RealModel("llama", "decoder", _llama, _token_batch, _logits, _token_loss),
        RealModel("bert", "encoder", _bert, _token_batch, _logits, _token_loss),
    )
}


def build_on_cpu(model: RealModel, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return model.build()
