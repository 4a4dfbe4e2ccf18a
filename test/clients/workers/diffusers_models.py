"""diffusers, unchanged, through its npu path: a tiny ``UNet2DConditionModel`` with
``AttnProcessorNPU`` (``enable_npu_flash_attention``) and one DDIM denoising step, and a
tiny ``FluxTransformer2DModel`` on the ``_native_npu`` attention backend and a tiny
``SD3Transformer2DModel`` with RMSNorm on queries and keys, in bfloat16 (the
dtype for which diffusers calls ``npu_fusion_attention``), on npu and on cpu.

With torch_npu importable, diffusers calls ``torch_npu.npu_geglu`` (GEGLU),
``npu_rms_norm`` (RMSNorm with a weight) and ``npu_fusion_attention`` whatever the tensors'
device. ``npu_geglu`` and ``npu_rms_norm`` have no cpu kernel, as on Ascend, so the cpu run
first shows that failure; then this process registers, for the cpu only, each operator's
documented formula in plain ATen ops (below), and the same diffusers code runs on cpu
taking the same path. ``npu_fusion_attention`` runs its own cpu kernel. The worker reports
what failed and how far each npu output is from the cpu one.

Usage: diffusers_models.py   (prints RESULT lines, see test/distributed/workers/harness.py)
"""
from __future__ import annotations

import copy
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import torchvision_schemas  # noqa: E402

torchvision_schemas.define()  # diffusers imports transformers, which imports torchvision

import torch_npu  # noqa: E402,F401
from diffusers import DDIMScheduler, FluxTransformer2DModel, SD3Transformer2DModel, UNet2DConditionModel  # noqa: E402
from harness import report  # noqa: E402
from torch_npu_census import census  # noqa: E402

DTYPE = torch.bfloat16


# --- cpu references of the two operators without a cpu kernel (Ascend's formulas) ---------

def geglu_reference(x, dim=-1, approximate=1, activate_left=False):
    """Ascend's npu_geglu: split ``x`` in halves along ``dim``; the gate is the second half
    (the first with activate_left); float32 GELU (tanh form for approximate=1) times the
    other half, each output rounded once to x's dtype."""
    first, second = x.float().chunk(2, dim=dim)
    gate, linear = (first, second) if activate_left else (second, first)
    gelu = F.gelu(gate, approximate="tanh" if approximate == 1 else "none")
    return (linear * gelu).to(x.dtype), gelu.to(x.dtype)


def rms_norm_reference(x, gamma, epsilon=1e-6):
    """Ascend's npu_rms_norm: float32 ``x * rsqrt(mean(x^2) + eps) * gamma`` over gamma's
    trailing dimensions, rounded once; the second output is the float32 rstd."""
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    x32 = x.float()
    rstd = torch.rsqrt(x32.square().mean(dims, keepdim=True) + epsilon)
    return (x32 * rstd * gamma.float()).to(x.dtype), rstd


_CPU_REFERENCES = None


def register_cpu_references() -> None:
    global _CPU_REFERENCES
    _CPU_REFERENCES = torch.library.Library("npu", "IMPL")
    _CPU_REFERENCES.impl("npu_geglu", geglu_reference, "CPU")
    _CPU_REFERENCES.impl("npu_rms_norm", rms_norm_reference, "CPU")


# --- the models ----------------------------------------------------------------------------

def tiny_unet():
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8, 16),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=8, attention_head_dim=2, norm_num_groups=4)
    unet.enable_npu_flash_attention()
    return unet.to(DTYPE).eval()


def unet_inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, 4, 8, 8, generator=g).to(DTYPE), torch.randn(2, 5, 8, generator=g).to(DTYPE)


def denoise(unet, device):
    """One DDIM step (deterministic: eta 0) from the first of 5 timesteps."""
    unet = copy.deepcopy(unet).to(device)
    latents, text = (t.to(device) for t in unet_inputs())
    scheduler = DDIMScheduler(num_train_timesteps=50)
    scheduler.set_timesteps(5)
    t = scheduler.timesteps[0]
    with torch.no_grad():
        noise = unet(latents, t, encoder_hidden_states=text).sample
        return noise, scheduler.step(noise, t, latents).prev_sample


def tiny_flux():
    torch.manual_seed(0)
    flux = FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
        num_attention_heads=2, joint_attention_dim=16, pooled_projection_dim=16, axes_dims_rope=(4, 2, 2))
    flux.set_attention_backend("_native_npu")
    return flux.to(DTYPE).eval()


def flux_forward(flux, device):
    flux = copy.deepcopy(flux).to(device)
    g = torch.Generator().manual_seed(2)
    tokens, text_tokens = 16, 6
    args = dict(
        hidden_states=torch.randn(1, tokens, 4, generator=g),
        encoder_hidden_states=torch.randn(1, text_tokens, 16, generator=g),
        pooled_projections=torch.randn(1, 16, generator=g),
        timestep=torch.tensor([0.5]),
        img_ids=torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(4.0), indexing="ij"), -1).reshape(-1, 3),
        txt_ids=torch.zeros(text_tokens, 3),
    )
    args = {k: (v.to(device, DTYPE) if k in ("hidden_states", "encoder_hidden_states", "pooled_projections") else v.to(device))
            for k, v in args.items()}
    with torch.no_grad():
        return flux(**args).sample


def tiny_sd3():
    """SD3 with RMSNorm on queries and keys: diffusers' RMSNorm, which calls npu_rms_norm
    (Flux's attention normalises with torch.nn.RMSNorm instead)."""
    torch.manual_seed(0)
    sd3 = SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=2,
        joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=16, out_channels=4,
        pos_embed_max_size=8, qk_norm="rms_norm")
    return sd3.to(DTYPE).eval()


def sd3_forward(sd3, device):
    sd3 = copy.deepcopy(sd3).to(device)
    g = torch.Generator().manual_seed(3)
    latents = torch.randn(1, 4, 8, 8, generator=g).to(device, DTYPE)
    text = torch.randn(1, 6, 16, generator=g).to(device, DTYPE)
    pooled = torch.randn(1, 16, generator=g).to(device, DTYPE)
    with torch.no_grad():
        return sd3(hidden_states=latents, encoder_hidden_states=text, pooled_projections=pooled,
                   timestep=torch.tensor([10], device=device)).sample


def compare(npu: torch.Tensor, cpu: torch.Tensor) -> dict:
    npu = npu.cpu()
    return {"equal": bool(torch.equal(npu, cpu)), "max_abs_diff": float((npu.float() - cpu.float()).abs().max()),
            "dtype": str(npu.dtype), "shape": list(npu.shape), "finite": bool(torch.isfinite(npu).all())}


def main() -> None:
    unet, flux, sd3 = tiny_unet(), tiny_flux(), tiny_sd3()
    processors = sorted({type(p).__name__ for p in unet.attn_processors.values()})
    try:
        denoise(unet, "cpu")
        cpu_failure = None
    except NotImplementedError as error:
        cpu_failure = str(error).split(". ")[0]
    register_cpu_references()
    cpu_noise, cpu_latents = denoise(unet, "cpu")
    cpu_flux = flux_forward(flux, "cpu")
    cpu_sd3 = sd3_forward(sd3, "cpu")
    with census() as unet_touched:
        npu_noise, npu_latents = denoise(unet, "npu")
    with census() as flux_touched:
        npu_flux = flux_forward(flux, "npu")
    with census() as sd3_touched:
        npu_sd3 = sd3_forward(sd3, "npu")
    report(unet_processors=processors, cpu_without_reference=cpu_failure,
           unet_noise=compare(npu_noise, cpu_noise), unet_step=compare(npu_latents, cpu_latents),
           flux=compare(npu_flux, cpu_flux), unet_touched=unet_touched, flux_touched=flux_touched,
           sd3=compare(npu_sd3, cpu_sd3), sd3_touched=sd3_touched)


if __name__ == "__main__":
    main()
