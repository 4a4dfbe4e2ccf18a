"""accelerate and the transformers Trainer under torchrun on an npu machine: they choose hccl
and npu:<local_rank> by themselves, and a tiny model trains for a few steps.

Usage: hf_clients.py <accelerate|trainer> <output dir>
"""
from __future__ import annotations

import sys

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401  (as Ascend scripts do; accelerate would import it too)
from harness import define_torchvision_schemas, listed, local_rank, report

mode, out_dir = sys.argv[1], sys.argv[2]
result = {}


def agree(params):
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [listed(p) for p in params])
    return all(g == gathered[0] for g in gathered)


if mode == "accelerate":
    from accelerate import Accelerator

    accelerator = Accelerator()
    result["backend"] = accelerator.state.backend
    result["distributed_type"] = str(accelerator.distributed_type)
    result["device"] = str(accelerator.device)
    result["dist_backend"] = str(dist.get_backend())

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    start = [p.detach().clone() for p in model.parameters()]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    # The optimizer is built on the model already on its device (.to() of a model to npu
    # replaces its Parameter objects until npu answers _has_compatible_shallow_copy_type).
    model = model.to(accelerator.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    result["wrapped"] = type(model).__name__
    losses = []
    for _ in range(3):
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    params = [p.detach().cpu() for p in accelerator.unwrap_model(model).parameters()]
    result["params_on_npu"] = all(p.device.type == "npu" for p in model.parameters())
    result["losses"] = losses
    result["moved"] = max((a - b).abs().max().item() for a, b in zip(params, start)) > 1e-3
    result["loss_fell"] = sum(losses[-4:]) < sum(losses[:4])
    result["ranks_agree"] = agree(params)

elif mode == "trainer":
    define_torchvision_schemas()
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    model = GPT2LMHeadModel(config)
    start = [p.detach().clone() for p in model.parameters()]
    g = torch.Generator().manual_seed(2)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (32, 16), generator=g)]
    args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=4, max_steps=4, logging_steps=1,
                             learning_rate=1e-3, report_to=[], save_strategy="no", disable_tqdm=True,
                             dataloader_num_workers=0, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    result["device"] = str(args.device)
    result["parallel_mode"] = str(args.parallel_mode)
    out = trainer.train()
    result["dist_backend"] = str(dist.get_backend())
    result["wrapped"] = type(trainer.model_wrapped).__name__
    result["train_loss"] = out.training_loss
    result["logged_losses"] = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    params = [p.detach().cpu() for p in model.parameters()]
    result["params_on_npu"] = all(p.device.type == "npu" for p in model.parameters())
    result["moved"] = max((a - b.cpu()).abs().max().item() for a, b in zip(params, start)) > 1e-5
    result["ranks_agree"] = agree(params)

result["local_rank"] = local_rank()
report(**result)
