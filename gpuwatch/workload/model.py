"""The model served: a transformer encoder classifier with random weights, built in code (nothing downloaded).

LayerNorm and the pooled head always compute in FP32, whatever the weights' dtype, and attention uses
``scaled_dot_product_attention``, whose fused kernels keep the softmax in FP32; so the BF16 stage changes
the matmuls only, which is where tensor cores pay.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpuwatch.workload.config import ModelSize


def _attention_kernels() -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """Flash, memory-efficient or math attention: the kernels that are known to be CUDA-graph safe with a
    padding mask (cuDNN attention is left out: some torch versions pick it and then fail on a mask)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3: every backend it has is fine
        return contextlib.nullcontext
    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    return lambda: sdpa_kernel(backends)


ATTENTION_KERNELS = _attention_kernels()


class FP32LayerNorm(nn.LayerNorm):
    """LayerNorm computed in FP32 and returned in the input's dtype (BF16 statistics lose digits)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x.float(), self.normalized_shape, self.weight.float(), self.bias.float(),
                            self.eps).to(x.dtype)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = FP32LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = FP32LayerNorm(d)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Encoder(nn.Module):
    """ids [B, L] int32 + lengths [B] -> class logits [B, classes] in FP32; padding is masked out."""

    def __init__(self, size: ModelSize, classes: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(size.vocab, size.d_model)
        self.pos = nn.Parameter(torch.randn(size.buckets[-1], size.d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(size.d_model, size.heads, size.ffn) for _ in range(size.layers))
        self.ln_f = FP32LayerNorm(size.d_model)
        self.head = nn.Linear(size.d_model, classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        with ATTENTION_KERNELS():
            return self._forward(ids, lengths)

    def _forward(self, ids: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        n = ids.shape[1]
        x = self.embed(ids) + self.pos[:n]
        if lengths is None:  # one unpadded request
            for block in self.blocks:
                x = block(x, None)
            pooled = self.ln_f(x).float().mean(dim=1)
        else:  # padded batch: mask padded keys, pool over real tokens only
            keep = torch.arange(n, device=ids.device)[None, :] < lengths[:, None]
            for block in self.blocks:
                x = block(x, keep[:, None, None, :])
            h = self.ln_f(x).float() * keep[..., None]
            pooled = h.sum(dim=1) / lengths[:, None].clamp(min=1)
        return F.linear(pooled, self.head.weight.float(), self.head.bias.float())


def build_model(size: ModelSize, device: str, seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: the base model's 180 M weights, in well under 1 s
        model = Encoder(size)
    for name, p in model.named_parameters():  # small weights keep activations in a sane range
        if p.dim() > 1 and name != "pos":
            nn.init.normal_(p, std=0.02)
    return model.to(device).eval()


def to_bf16(model: Encoder) -> Encoder:
    """A BF16 copy: linear and embedding weights in BF16, LayerNorm parameters and the head in FP32."""
    half = copy.deepcopy(model)
    for module in half.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)) and module is not half.head:
            module.to(torch.bfloat16)
    half.pos.data = half.pos.data.to(torch.bfloat16)
    return half


@torch.inference_mode()
def max_relative_error(reference: Encoder, candidate: Encoder, ids: torch.Tensor,
                       lengths: torch.Tensor) -> dict[str, Any]:
    """How far ``candidate``'s logits are from ``reference``'s on one batch.

    ``max_rel_err`` = max |a - b| / max |a| (relative to the output's scale: per-element ratios blow up
    on logits near zero); also the share of rows whose top class agrees."""
    a = reference(ids, lengths).float()
    b = candidate(ids, lengths).float()
    err = (a - b).abs().max().item() / max(a.abs().max().item(), 1e-12)
    agree = (a.argmax(dim=1) == b.argmax(dim=1)).float().mean().item()
    return {"max_rel_err": round(err, 6), "top1_agreement": round(agree, 4), "rows": int(ids.shape[0])}
