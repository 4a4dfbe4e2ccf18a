"""torchtitan, unchanged: its llama3 debug model (``llama3_debugmodel``) trains a few steps
with its own Trainer on npu, on one rank or with FSDP over 2 (torchrun), and reports each
step's loss.

The data and tokenizer are local and synthetic (no hub, no ``datasets``): token ids drawn
from a seeded generator, the same global batch whatever the world size. Everything else is
torchtitan's debug configuration: its model, AdamW, warm-up schedule, selective activation
checkpointing, and its device choice (``npu``, found through torch's accelerator), with one
setting changed: ``parallelism.spmd_backend = "partial_dtensor"`` (see ``SPMD_BACKEND``).

Usage: torchtitan_train.py <dump dir> <steps> <global batch>
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
from torch.utils.data import IterableDataset

from harness import report
from torchtitan.components.dataloader import ParallelAwareDataloader
from torchtitan.components.tokenizer import BaseTokenizer
from torchtitan.models.llama3.config_registry import llama3_debugmodel

SEQ_LEN = 32
# torchtitan 0.3.0's default backend, "spmd_types", hands fully_shard plain parameters that
# carry spmd_types annotations, together with ``dp_mesh_dims``; the FSDP that turns such
# parameters into DTensors on the full mesh came after torch 2.13, whose FSDPParam rejects
# them ("When dp_mesh_dims is provided, all parameters must be DTensors on the full SPMD
# mesh"), on cpu with gloo as on npu. "partial_dtensor" is torchtitan's classic FSDP2 path:
# fully_shard on the data-parallel mesh, which torch 2.13 supports.
SPMD_BACKEND = "partial_dtensor"


class SyntheticTokenizer(BaseTokenizer):
    """A tokenizer over the debug model's 2048 ids: the data is ids already."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        vocab_size: int = 2048

    def __init__(self, config: Config, tokenizer_path: str | None = None, **_):
        super().__init__()
        self.vocab_size = config.vocab_size
        self.eos_id = config.vocab_size - 1

    def encode(self, text, *args, **kwargs) -> list[int]:
        return [int(t) for t in text.split()]

    def decode(self, ids, *args, **kwargs) -> str:
        return " ".join(map(str, ids))

    def get_vocab_size(self) -> int:
        return self.vocab_size


class SyntheticTokens(IterableDataset):
    """This rank's share of a seeded stream of (input, label) windows: sample i of the
    global stream goes to rank i % world, so every world size sees the same global batch."""

    def __init__(self, vocab: int, dp_rank: int, dp_world_size: int):
        self.vocab, self.rank, self.world = vocab, dp_rank, dp_world_size

    def __iter__(self):
        g = torch.Generator().manual_seed(1234)
        index = 0
        while True:
            tokens = torch.randint(0, self.vocab, (SEQ_LEN + 1,), generator=g)
            if index % self.world == self.rank:
                yield {"input": tokens[:-1], "positions": torch.arange(SEQ_LEN)}, tokens[1:]
            index += 1


class SyntheticDataLoader(ParallelAwareDataloader):
    @dataclass(kw_only=True, slots=True)
    class Config(ParallelAwareDataloader.Config):
        pass

    def __init__(self, config: Config, *, dp_world_size: int, dp_rank: int, tokenizer: BaseTokenizer,
                 seq_len: int, local_batch_size: int, **_):
        dataset = SyntheticTokens(tokenizer.get_vocab_size(), dp_rank, dp_world_size)
        super().__init__(dataset, dp_rank=dp_rank, dp_world_size=dp_world_size, batch_size=local_batch_size)


def main() -> None:
    dump, steps, global_batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    world = int(os.environ.get("WORLD_SIZE", "1"))
    config = llama3_debugmodel()
    config.tokenizer = SyntheticTokenizer.Config()
    config.dataloader = SyntheticDataLoader.Config()
    config.dump_folder = dump
    config.training.steps = steps
    config.training.seq_len = SEQ_LEN
    config.training.local_batch_size = global_batch // world
    config.checkpoint.enable = False
    config.validator.enable = False
    config.debug.seed = 0
    config.parallelism.data_parallel_shard_degree = world
    config.parallelism.spmd_backend = SPMD_BACKEND
    trainer = config.build()
    model = trainer.model_parts[0]
    # Reported before training too, so that a run that stops in its first step still shows
    # how the model was sharded.
    report(device=str(trainer.device), fsdp=type(model).__name__.startswith("FSDP"),
           param_types=sorted({type(p).__name__ for p in model.parameters()}),
           param_devices=sorted({p.device.type for p in model.parameters()}))
    losses = []
    trainer.metrics_processor.logger = _LossLogger(losses, trainer.metrics_processor.logger)
    trainer.train()
    report(losses=losses, param_types=sorted({type(p).__name__ for p in model.parameters()}),
           param_devices=sorted({p.device.type for p in model.parameters()}))
    trainer.close()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


class _LossLogger:
    """torchtitan's metrics logger, also keeping each step's loss for the report."""

    def __init__(self, losses: list, inner):
        self.losses, self.inner = losses, inner

    def log(self, metrics, step, *args, **kwargs):
        for key, value in metrics.items():
            if key.startswith("loss_metrics/global_avg_loss"):
                self.losses.append(float(value))
        return self.inner.log(metrics, step, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


if __name__ == "__main__":
    main()
