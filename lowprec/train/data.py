"""Training tasks: a synthetic task with tunable gradient magnitudes, and real digits.

Every task is built from a seed, needs no download, and carries the model
shape and the optimizer settings it trains well with.

``underflow`` (the demo's default)
    A 10-class Gaussian mixture in 32 dimensions: class means drawn from
    ``N(0, I)``, each example its class mean plus ``noise * N(0, I)`` (noise 2:
    the classes overlap; fp32 reaches about 80% held-out accuracy in 600 steps),
    learned by a
    32-64-64-10 ReLU MLP with SGD (momentum 0.9, learning rate 0.001, batch 64).
    Its knob is ``grad_exp = k``: the loss is multiplied by ``2**-k`` and the
    learning rate by ``2**k``. In float32 this changes nothing at all --
    multiplying by a power of two is exact, so the fp32 run is the same bit for
    bit for every ``k`` (a test checks this) -- but every gradient is ``2**k``
    times smaller, which moves the histogram of ``log2|g|`` ``k`` binades to the
    left, below FP16's smallest subnormal (``2**-24``). Small loss weights,
    losses normalised by large token counts and deep networks do the same in
    practice. See docs/training.md for how ``k`` was chosen.
``regression``
    Inputs ``x ~ N(0, I)`` in 32 dimensions, targets the 10 outputs of a fixed
    random two-layer tanh network (the teacher), mean squared error.
``digits``
    scikit-learn's 8x8 handwritten digits (1797 images shipped inside
    scikit-learn), standardised, 80/20 split. Needs the ``data`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._names import did_you_mean

__all__ = ["TASKS", "Task", "get_task"]

TASKS = {
    "underflow": "synthetic classification whose gradients are 2^-k times smaller (default)",
    "regression": "synthetic regression (teacher network), mean squared error",
    "digits": "scikit-learn's 8x8 handwritten digits (needs: pip install 'lowprec[data]')",
}


@dataclass(frozen=True, eq=False)
class Task:
    """A dataset plus the model and optimizer settings to train it with."""

    name: str
    kind: str  # "classification" or "regression"
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    hidden: tuple[int, ...]
    lr: float
    momentum: float = 0.9
    batch_size: int = 64
    grad_exp: int = 0  # loss *= 2**-grad_exp, lr *= 2**grad_exp

    @property
    def n_out(self) -> int:
        return int(self.y_train.max()) + 1 if self.kind == "classification" else \
            self.y_train.shape[1]

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer widths from input to output."""
        return (self.x_train.shape[1], *self.hidden, self.n_out)


def _teacher(seed: int, n: int, d: int = 32, width: int = 32, out: int = 10
             ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 1])
    w1 = rng.standard_normal((d, width)) / np.sqrt(d)
    w2 = rng.standard_normal((width, out)) / np.sqrt(width)
    x = rng.standard_normal((n, d))
    return x.astype(np.float32), np.tanh(np.tanh(2 * x @ w1) @ w2)


def underflow_task(seed: int = 0, grad_exp: int = 18, n_train: int = 4096,
                   n_test: int = 1024, noise: float = 2.0, lr: float = 0.001) -> Task:
    """The synthetic classification task (see the module docstring)."""
    rng = np.random.default_rng([seed, 3])
    means = rng.standard_normal((10, 32))
    y = rng.integers(0, 10, n_train + n_test)
    x = (means[y] + noise * rng.standard_normal((y.size, 32))).astype(np.float32)
    return Task("underflow", "classification", x[:n_train], y[:n_train], x[n_train:],
                y[n_train:], hidden=(64, 64), lr=lr, grad_exp=grad_exp)


def regression_task(seed: int = 0, grad_exp: int = 0, n_train: int = 4096,
                    n_test: int = 1024) -> Task:
    """Regress the teacher's 10 outputs (mean squared error)."""
    x, t = _teacher(seed, n_train + n_test)
    t = t.astype(np.float32)
    return Task("regression", "regression", x[:n_train], t[:n_train], x[n_train:],
                t[n_train:], hidden=(64, 64), lr=0.05, grad_exp=grad_exp)


def digits_task(seed: int = 0, grad_exp: int = 0) -> Task:
    """scikit-learn's digits (8x8 images, 10 classes), shuffled by ``seed``, 80/20 split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ValueError(
            "task 'digits' needs scikit-learn, which ships the dataset offline: "
            "pip install 'lowprec[data]' (or pip install scikit-learn)"
        ) from None
    d = load_digits()
    x = d.data.astype(np.float64)
    y = d.target.astype(np.int64)
    order = np.random.default_rng([seed, 2]).permutation(len(y))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(y))
    mu, sd = x[:n_train].mean(axis=0), x[:n_train].std(axis=0) + 1e-6
    x = ((x - mu) / sd).astype(np.float32)
    return Task("digits", "classification", x[:n_train], y[:n_train], x[n_train:], y[n_train:],
                hidden=(64,), lr=0.05, grad_exp=grad_exp)


def get_task(name: str, seed: int = 0, **knobs: int) -> Task:
    """A task by name (see :data:`TASKS`); ``knobs`` such as ``grad_exp`` override defaults."""
    makers = {"underflow": underflow_task, "regression": regression_task, "digits": digits_task}
    if name not in makers:
        raise ValueError(f"unknown task {name!r}{did_you_mean(name, makers)}; "
                         f"tasks: {', '.join(TASKS)}")
    return makers[name](seed, **knobs)
