"""Real models written for CUDA, moved with ``.cuda()``/``.to("cuda")`` under transfer_to_npu:
a torchvision ResNet-18 training step and a transformers GPT-2 ``generate``, each equal to
the same steps on cpu. Code none of torch_npu's authors wrote, run in a fresh interpreter."""
from __future__ import annotations

import json


def test_torchvision_and_transformers_models_moved_with_cuda_equal_cpu(python):
    out = python(
        """
        import sys; sys.path.insert(0, "test")
        import torchvision_schemas; torchvision_schemas.define()
        import torch_npu.contrib.transfer_to_npu
        import copy, json, torch, torchvision
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        cpu_model = torchvision.models.resnet18(num_classes=10)
        model = copy.deepcopy(cpu_model).cuda()
        x = torch.randn(2, 3, 64, 64)
        def step(m, inp):
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            loss = torch.nn.functional.cross_entropy(m(inp), torch.tensor([1, 3], device=inp.device))
            loss.backward(); opt.step()
            return loss.item(), m.fc.weight.detach().cpu()
        loss_cpu, weight_cpu = step(cpu_model, x)
        loss_npu, weight_npu = step(model, x.cuda())
        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=64,
                            bos_token_id=0, eos_token_id=0)
        torch.manual_seed(0)
        gpt_cpu = GPT2LMHeadModel(config).eval()
        gpt_npu = copy.deepcopy(gpt_cpu).to("cuda")
        ids = torch.randint(1, 100, (1, 8))
        tokens_cpu = gpt_cpu.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
        tokens_npu = gpt_npu.generate(ids.to("cuda"), max_new_tokens=6, do_sample=False, pad_token_id=0)
        print(json.dumps({
            "devices": [str(next(model.parameters()).device), str(tokens_npu.device)],
            "resnet_loss_equal": loss_cpu == loss_npu, "resnet_weights_equal": torch.equal(weight_cpu, weight_npu),
            "gpt2_tokens_equal": torch.equal(tokens_cpu, tokens_npu.cpu()),
        }))
        """,
        timeout=600,
    )
    assert json.loads(out.strip().splitlines()[-1]) == {
        "devices": ["npu:0", "npu:0"], "resnet_loss_equal": True, "resnet_weights_equal": True,
        "gpt2_tokens_equal": True,
    }
