"""The multilayer perceptron, with every rounding of a precision policy in its graph.

One layer, as the forward pass builds it (``q(.)`` rounds a value, ``g(.)``
rounds the gradient flowing back through that point)::

    W_c = g_wgrad(q_weights(W))          # compute copy of the master weights
    b_c = g_wgrad(q_weights(b))
    z   = g_actgrad(q_act(h @ W_c + b_c)) # float32 (or the policy's) accumulation
    h'  = relu(z)                          # exact: relu of a format value is one

The gradient rounding ``g_actgrad`` is where activation gradients underflow in
FP16; ``g_wgrad`` is where weight gradients do. Both are watched: per step and
per layer the network counts what they did (:class:`~lowprec.train.quant.SiteStats`).
Weight and bias gradients are leaves of the graph, so when their rounding keeps no
state the ``g_wgrad`` node only marks the place and :meth:`Network.finish_backward`
rounds all of them in one call after ``backward()`` (the same values, fewer calls);
likewise the master-to-compute cast of all parameters is one call per step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from ..autograd import Tensor, round_grad, round_value
from ..autograd.tensor import matmul
from ..matmul import matmul as lp_matmul
from ..rounding import round_to
from .policy import Policy, Quant
from .quant import Rounder, SiteStats, make_rounder, smallest_normal, watched

__all__ = ["Network", "product_for"]

Product = Callable[[np.ndarray, np.ndarray], np.ndarray]


def product_for(policy: Policy) -> Product:
    """The matmul of the policy's accumulation model (inputs are already rounded)."""
    acc = policy.accumulate
    if acc == "fp32":
        return np.matmul
    if acc == "fp64":
        return lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)
    acc_fmt, _, model = acc.rpartition(":")
    q = policy.activations
    inputs = q.format if q is not None and q.scaling == "none" else "fp32"

    def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = lp_matmul(a, b, inputs=inputs, accumulate=acc_fmt or "fp32", model=model)
        return np.asarray(out, dtype=a.dtype)

    return product


def _eval_rounder(q: Quant, rng: np.random.Generator, axis: int) -> Rounder:
    """A stateless rounder for evaluation: delayed scaling is replaced by the
    current tensor's own power-of-two scale, so evaluating never changes the
    amax history that training uses."""
    if q.scaling != "delayed":
        return make_rounder(q, rng, axis)
    from ..formats import get_format

    fmt = get_format(q.format)

    def current(x: np.ndarray) -> np.ndarray:
        amax = float(np.max(np.abs(x))) if x.size else 0.0
        if not np.isfinite(amax) or amax == 0:
            return round_to(x, fmt, q.mode, saturate=True)
        s = np.float32(2.0 ** np.floor(np.log2(fmt.max / amax)))
        return (round_to(x * s, fmt, q.mode, saturate=True) / s).astype(x.dtype)

    return current


class Network:
    """An MLP (ReLU hidden layers) whose forward pass applies a policy's roundings.

    Parameters
    ----------
    sizes: layer widths, input first.
    policy: the precision policy.
    rng: seeded generator for the initial weights.
    round_rng: seeded generator for stochastic rounding (default: ``rng``).
    record: count underflow/subnormal/overflow at the gradient roundings.
    """

    def __init__(self, sizes: tuple[int, ...], policy: Policy, rng: np.random.Generator,
                 round_rng: np.random.Generator | None = None, *, record: bool = True) -> None:
        self.policy = policy
        self.layers = [f"fc{i + 1}" for i in range(len(sizes) - 1)]
        self.params: list[Tensor] = []
        for n_in, n_out in itertools.pairwise(sizes):
            w = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
            self.params += [Tensor(w, requires_grad=True),
                            Tensor(np.zeros(n_out, np.float32), requires_grad=True)]
        stored = policy.master if policy.master is not None else policy.weights
        if stored is not None:  # the initial weights, written in the stored format
            for p in self.params:
                p.data = round_to(p.data, stored.format).astype(np.float32)
        round_rng = rng if round_rng is None else round_rng
        self.eval_rng = np.random.default_rng(round_rng.integers(2**63))
        self.product = product_for(policy)
        self.record = record
        self.samples: dict[str, list[np.ndarray]] | None = None
        n = len(self.layers)
        self.act_stats = [SiteStats() for _ in range(n)]
        self.weight_stats = [SiteStats() for _ in range(n)]
        self._build(round_rng)

    def _build(self, rng: np.random.Generator) -> None:
        p = self.policy
        n = len(self.layers)
        cast = p.master is not None and p.weights is not None
        bias_cast = cast and p.weights.scaling == "none"
        # forward roundings (fresh state per site); None = not rounded
        self.w_round = [make_rounder(p.weights, rng, axis=0) if cast else None for _ in range(n)]
        self.b_round = [make_rounder(p.weights, rng) if bias_cast else None for _ in range(n)]
        self.a_round = [make_rounder(p.activations, rng) if p.activations else None
                        for _ in range(n + 1)]
        self.w_eval = [_eval_rounder(p.weights, self.eval_rng, 0) if cast else None
                       for _ in range(n)]
        self.b_eval = [_eval_rounder(p.weights, self.eval_rng, -1) if bias_cast else None
                       for _ in range(n)]
        self.a_eval = [_eval_rounder(p.activations, self.eval_rng, -1) if p.activations
                       else None for _ in range(n + 1)]
        # An unscaled, deterministic cast of the master weights is done for all parameters
        # in one call (as AMP caches its casts): the same values, one call instead of 2n.
        self._cast_all = None
        if cast and bias_cast and p.weights.mode != "stochastic":
            q = p.weights

            def cast_all() -> tuple[list[Rounder], list[Rounder]]:
                flat = np.concatenate([t.data.ravel() for t in self.params])
                low = round_to(flat, q.format, q.mode)
                cuts = np.cumsum([t.data.size for t in self.params])[:-1]
                parts = [a.reshape(t.data.shape)
                         for a, t in zip(np.split(low, cuts), self.params)]
                fixed = [(lambda _x, a=a: a) for a in parts]
                return fixed[0::2], fixed[1::2]

            self._cast_all = cast_all
        # gradient roundings, watched
        self.ag_round = [self._grad_site(p.act_grads, rng, -1, "act_grad", i, self.act_stats)
                         for i in range(n)]
        # Weight and bias gradients are leaves: nothing reads them between their rounding
        # and the optimizer. When that rounding keeps no state (no scaling), the op in the
        # graph only marks the spot, and finish_backward() rounds (and watches) all of them
        # in one call -- the same values, one call instead of 2n.
        wq = p.weight_grads
        self._deferred: Rounder | None = None
        if wq is None or wq.scaling == "none":
            if wq is not None or self.record:
                self._deferred = make_rounder(wq, rng) if wq is not None else (lambda x: x)
            self._deferred_q = wq or Quant("fp32")
            marker = (lambda x: x) if wq is not None else None
            self.wg_round = [marker] * n
            self.bg_round = [marker] * n
        else:
            self.wg_round = [self._grad_site(wq, rng, 0, "weight_grad", i, self.weight_stats)
                             for i in range(n)]
            self.bg_round = [self._grad_site(wq, rng, -1, "bias_grad", i, self.weight_stats)
                             for i in range(n)]
        # the network's input: pre-rounded once (see round_inputs) when that is stateless
        self._inputs_rounded = False

    def round_inputs(self, x: np.ndarray) -> np.ndarray:
        """The dataset ``x`` stored in the activation format, rounded once for the whole
        run when the rounding keeps no state (plain format, deterministic mode); forward()
        then takes it as it is. Otherwise ``x`` unchanged (forward rounds each batch)."""
        q = self.policy.activations
        if q is None or q.scaling != "none" or q.mode == "stochastic":
            return x
        self._inputs_rounded = True
        return round_to(x, q.format, q.mode)

    def finish_backward(self) -> None:
        """Round the weight and bias gradients (if deferred, see _build) and record them."""
        if self._deferred is None:
            return
        grads = [t.grad for t in self.params]
        if any(g is None for g in grads):
            raise ValueError("finish_backward() needs every parameter's gradient")
        before = np.concatenate([g.ravel() for g in grads])
        after = self._deferred(before)
        cuts = np.cumsum([g.size for g in grads])[:-1]
        tiny = smallest_normal(self._deferred_q)
        for k, (b, a, t) in enumerate(zip(np.split(before, cuts), np.split(after, cuts),
                                          self.params)):
            t.grad = a.reshape(t.data.shape)
            if self.record:
                layer = k // 2
                self.weight_stats[layer].record(b, a, tiny)
                if self.samples is not None and k % 2 == 0:
                    self.samples.setdefault(f"weight_grad/{self.layers[layer]}", []).append(b)

    def _grad_site(self, q: Quant | None, rng: np.random.Generator, axis: int, kind: str,
                   layer: int, stats: list[SiteStats]) -> Rounder | None:
        rounder = make_rounder(q, rng, axis) if q is not None else (lambda x: x)
        if not self.record:
            return rounder if q is not None else None
        key = f"{kind}/{self.layers[layer]}"

        def sample(x: np.ndarray) -> None:
            if self.samples is not None and kind != "bias_grad":
                self.samples.setdefault(key, []).append(x)

        return watched(rounder, q or Quant("fp32"), lambda: stats[layer], sample)

    def reset_stats(self) -> None:
        for s in self.act_stats + self.weight_stats:
            s.__init__()

    def forward(self, x: np.ndarray, *, train: bool = True) -> Tensor:
        """Logits (or predictions) for the batch ``x``; ``train=False`` builds no
        gradient roundings and leaves scaling state alone."""
        a_round = self.a_round if train else self.a_eval
        w_round = self.w_round if train else self.w_eval
        b_round = self.b_round if train else self.b_eval
        if train and self._cast_all is not None:
            w_round, b_round = self._cast_all()
        h = Tensor(x)
        if a_round[0] is not None and not self._inputs_rounded:
            h = round_value(h, a_round[0], "round_input")
        last = len(self.layers) - 1
        for i in range(len(self.layers)):
            w, b = self.params[2 * i], self.params[2 * i + 1]
            if w_round[i] is not None:
                w = round_value(w, w_round[i], "round_weights")
            if b_round[i] is not None:
                b = round_value(b, b_round[i], "round_weights")
            if train and self.wg_round[i] is not None:
                w = round_grad(w, self.wg_round[i], "round_weight_grad")
                b = round_grad(b, self.bg_round[i], "round_weight_grad")
            z = matmul(h, w, self.product) + b
            if a_round[i + 1] is not None:
                z = round_value(z, a_round[i + 1], "round_activations")
            if train and self.ag_round[i] is not None:
                z = round_grad(z, self.ag_round[i], "round_act_grad")
            h = z.relu() if i < last else z
        return h
