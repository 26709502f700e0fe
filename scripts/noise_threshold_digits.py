"""FP4-All-the-Way's sqrt(3) test on a real run: tutorial 11's digits MLP (64-128-64-10,
SGD with momentum, batch 64), its weight gradients captured whole for 32 steps at the
start and again after 3000 steps, each layer's expected-gradient norm against the noise
of the NVFP4 recipe's stochastic rounding (``lowprec.recipes.lab.noise_threshold``).

    PYTHONPATH=. python scripts/noise_threshold_digits.py [--out noise_threshold.png]

Needs torch, scikit-learn (the digits) and matplotlib. Prints the rows; docs/recipes.md
holds a run's numbers.
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import lowprec.plot as lpp  # noqa: E402
import lowprec.torch as lpt  # noqa: E402
from lowprec.recipes import lab  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="noise_threshold.png")
    ap.add_argument("--steps", type=int, default=3000, help="steps between the captures")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    d = load_digits()
    x, y = torch.tensor(d.data / 16, dtype=torch.float32), torch.tensor(d.target)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)

    def run(steps: int) -> None:
        for _ in range(steps):
            idx = torch.randint(0, len(x), (64,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()

    with lpt.capture(model, max_values=10**6, max_steps=32) as early:
        run(32)
    run(args.steps)
    with lpt.capture(model, max_values=10**6, max_steps=32) as late:
        run(32)
    fig, axs = plt.subplots(2, 1, figsize=(7.5, 4.6))
    for ax, cap, when in ((axs[0], early, "first 32 steps"),
                          (axs[1], late, f"32 steps after {args.steps + 32}")):
        rows = lab.noise_threshold(cap, draws=8, rng=0)
        print(f"{when}: layer, steps, size, ||mean gradient||, noise, ratio")
        for r in rows:
            print(f"  {r}")
        lpp.noise_threshold(rows, ax=ax, title=f"digits MLP, NVFP4 SR gradients, {when}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
