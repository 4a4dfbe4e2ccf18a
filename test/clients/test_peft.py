"""peft, unchanged: LoRA adapters on a tiny random Llama (transformers' ``LlamaConfig``,
built from the config, no download) train a few steps on npu and are merged with
``merge_and_unload``; every loss, every adapter weight and the merged model's logits equal
the same code on cpu, bit for bit.
"""
from __future__ import annotations

import copy
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torchvision_schemas  # noqa: E402

torchvision_schemas.define()  # transformers imports torchvision (see that module)
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

import torch_npu  # noqa: E402,F401

STEPS = 4


def tiny_llama():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-6)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    lora = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                           target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj"])
    torch.manual_seed(1)
    return peft.get_peft_model(model, lora)


def train(model, device):
    model = model.to(device)
    g = torch.Generator().manual_seed(2)
    # One batch, every step: the loss must fall as the adapters fit it.
    ids = torch.randint(0, 64, (2, 12), generator=g).to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    losses = []
    for step in range(STEPS):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    adapters = {n: p.detach().cpu() for n, p in model.named_parameters() if "lora_" in n}
    unmerged = model(input_ids=ids).logits.detach().cpu()
    merged_model = model.merge_and_unload()
    merged = merged_model(input_ids=ids).logits.detach().cpu()
    weights = {n: p.detach().cpu() for n, p in merged_model.named_parameters()}
    return losses, adapters, unmerged, merged, weights, merged_model


@pytest.fixture(scope="module")
def trained():
    base = tiny_llama()
    return train(copy.deepcopy(base), "cpu"), train(base, "npu")


def test_lora_training_equals_cpu(trained):
    (cpu_losses, cpu_adapters, *_), (npu_losses, npu_adapters, *_) = trained
    assert npu_losses == cpu_losses
    assert npu_losses[-1] < npu_losses[0]
    assert npu_adapters.keys() == cpu_adapters.keys() and len(npu_adapters) == 2 * 2 * 5
    for name in cpu_adapters:
        assert torch.equal(npu_adapters[name], cpu_adapters[name]), name
    # lora_B starts at zero: the adapters did train.
    assert all(npu_adapters[n].abs().max() > 0 for n in npu_adapters if "lora_B" in n)


def test_merge_and_unload_equals_cpu(trained):
    (_, _, cpu_unmerged, cpu_merged, cpu_weights, _), (_, _, npu_unmerged, npu_merged, npu_weights, npu_model) = trained
    assert not any("lora_" in n for n in npu_weights)
    assert isinstance(npu_model, transformers.LlamaForCausalLM)
    assert all(p.device.type == "npu" for p in npu_model.parameters())
    for name in cpu_weights:
        assert torch.equal(npu_weights[name], cpu_weights[name]), name
    assert torch.equal(npu_unmerged, cpu_unmerged) and torch.equal(npu_merged, cpu_merged)
    # Merging folds the adapters into the weights: the same function up to rounding.
    torch.testing.assert_close(npu_merged, npu_unmerged, rtol=1e-5, atol=1e-5)
