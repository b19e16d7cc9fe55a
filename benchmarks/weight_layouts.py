"""Can a seed's network be a view of the stack's parameters? Not a speed: a probe of the numerics, at one thread.

    python benchmarks/weight_layouts.py [--envs frozenlake acrobot minigrid lunarlander] [--seeds 16]

The stack applies each Linear with `torch.baddbmm` over its weights stored [seeds, in, out]; a seed's own
`ActorCritic` (evaluation, the influence a seed's own trainer scores) applies `nn.Linear` to [out, in]. One storage
for both would hand one of the two kernels its weight transposed. For every Linear of the env's network, on the
batch sizes a round feeds it (a collection step's envs, an evaluation step's episodes, a minibatch, a round's
records), this counts the cases where the result is not the same bits:
- the seed's forward on a view of the stack's storage (`F.linear` with the weight `stack[k].t()`) against its own
  contiguous weight;
- the stack's forward and its gradient with respect to the input on a stack stored [seeds, out, in] (baddbmm with
  the weight `.transpose(1, 2)`) against today's storage.
Either count above zero means one storage would change the rows the committed stacked runs hold.
"""

from __future__ import annotations

import argparse
import shlex
import sys

import torch
from batched_seeds import compose_config
from torch import nn

from rlinfluence.control.trainer import Trainer


def linear_shapes(env: str) -> tuple[list[tuple[int, int]], list[int]]:
    """The (in, out) of every Linear of the env's actor-critic, and the batch sizes a round feeds them."""
    cfg = compose_config([f"env={env}", "logger=disabled"])
    trainer = Trainer(cfg)
    shapes = [
        (layer.in_features, layer.out_features) for layer in trainer.model.modules() if isinstance(layer, nn.Linear)
    ]
    trainer.close()
    batches = sorted({cfg.env.n_envs, cfg.eval.n_parallel, cfg.ppo.batch_size, cfg.env.n_envs * cfg.env.n_steps})
    return shapes, batches


def differs_as_seed_view(x: torch.Tensor, stacked: torch.Tensor, bias: torch.Tensor) -> bool:
    """The seed's F.linear on a view of the stack's [in, out] storage against its own [out, in] weight."""
    view = stacked[0].t()
    return not torch.equal(nn.functional.linear(x, view, bias), nn.functional.linear(x, view.contiguous(), bias))


def differs_as_stack_transposed(x: torch.Tensor, stacked: torch.Tensor, bias: torch.Tensor) -> tuple[bool, bool]:
    """The stack's baddbmm (forward, input gradient) with its weights stored [seeds, out, in], against [seeds, in,
    out]."""
    results = []
    for weight in (stacked, stacked.transpose(1, 2).contiguous().transpose(1, 2)):
        inputs = x.clone().requires_grad_(True)
        out = torch.baddbmm(bias.unsqueeze(1), inputs, weight)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), inputs.grad))
    (forward, input_grad), (forward_t, input_grad_t) = results
    return not torch.equal(forward, forward_t), not torch.equal(input_grad, input_grad_t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["frozenlake", "acrobot", "minigrid", "lunarlander"])
    parser.add_argument("--seeds", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"command: python {shlex.join(sys.argv)}  (torch {torch.__version__}, one thread)")
    generator = torch.Generator().manual_seed(0)
    for env in args.envs:
        shapes, batches = linear_shapes(env)
        seed_view = stack_forward = stack_grad = cases = 0
        for n_in, n_out in shapes:
            if n_out == 1:
                continue  # the value head: the stack computes a 1-wide output as a product and a sum, not baddbmm
            for batch in batches:
                stacked = torch.randn(args.seeds, n_in, n_out, generator=generator)
                bias = torch.randn(args.seeds, n_out, generator=generator)
                x = torch.randn(args.seeds, batch, n_in, generator=generator)
                seed_view += differs_as_seed_view(x[0], stacked, bias[0])
                forward, grad = differs_as_stack_transposed(x, stacked, bias)
                stack_forward, stack_grad, cases = stack_forward + forward, stack_grad + grad, cases + 1
        print(
            f"{env:11s} {cases} (layer, batch) cases, N={args.seeds}: not the same bits as a seed view {seed_view}; "
            f"as a stack stored [seeds, out, in]: forward {stack_forward}, input gradient {stack_grad}"
        )


if __name__ == "__main__":
    main()
