"""The multilayer perceptron, with every rounding of a precision policy in its graph.

Read it in three steps, micrograd style: a :class:`Layer` is ``z = h @ W + b`` (then
ReLU); an :class:`MLP` is a list of layers; a :class:`Network` is an MLP that a
:class:`~lowprec.train.policy.Policy` has told where to round. One layer, as the
forward pass builds it (``q(.)`` rounds a value, ``g(.)`` rounds the gradient flowing
back through that point)::

    W_c = g_wgrad(q_weights(W))          # compute copy of the master weights
    b_c = g_wgrad(q_weights(b))
    z   = g_actgrad(q_act(h @ W_c + b_c)) # float32 (or the policy's) accumulation
    h'  = relu(z)                          # exact: relu of a format value is one

Each layer keeps its own roundings (:class:`Roundings`: one set for training, one for
evaluation, one for the gradients), so a stateful rounding (delayed scaling) has one
history per site. The gradient rounding ``g_actgrad`` is where activation gradients
underflow in FP16; ``g_wgrad`` is where weight gradients do. Both are watched: per step
and per layer the network counts what they did (:class:`~lowprec.train.quant.SiteStats`).

Two speed-ups give the same values with fewer calls. Weight and bias gradients are
leaves of the graph, so when their rounding keeps no state the ``g_wgrad`` node only
marks the place and :meth:`Network.finish_backward` rounds all of them in one call after
``backward()``; likewise an unscaled, deterministic master-to-compute cast of all
parameters is one call per step (:meth:`Network.cast_weights`).

>>> import numpy as np
>>> mlp = MLP((4, 8, 3), np.random.default_rng(0))
>>> [layer.name for layer in mlp.layers], len(mlp.parameters())
(['fc1', 'fc2'], 4)
>>> mlp(Tensor(np.ones((2, 4), np.float32))).shape
(2, 3)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from .._kernels.gemm import matmul_in_order
from ..autograd import Tensor, round_grad, round_value
from ..autograd.tensor import matmul
from ..matmul import matmul as lp_matmul
from ..rounding import round_to
from .gemm import GemmRounders, gemm, gemm_rounders
from .policy import Policy, Quant
from .quant import Rounder, SiteStats, make_rounder, smallest_normal, watched

__all__ = ["MLP", "Layer", "Network", "Roundings", "product_for"]

Product = Callable[[np.ndarray, np.ndarray], np.ndarray]


def product_for(policy: Policy) -> Product:
    """The matmul of the policy's accumulation model (inputs are already rounded)."""
    acc = policy.accumulate
    if acc == "fp32":  # in k order, not the BLAS's: the same bits on every processor
        return matmul_in_order
    if acc == "fp64":
        return lambda a, b: matmul_in_order(a.astype(np.float64),
                                            b.astype(np.float64)).astype(a.dtype)
    acc_fmt, _, model = acc.rpartition(":")
    q = policy.activations
    inputs = q.format if q is not None and q.scaling == "none" else "fp32"

    def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = lp_matmul(a, b, inputs=inputs, accumulate=acc_fmt or "fp32", model=model)
        return np.asarray(out, dtype=a.dtype)

    return product


def _eval_rounder(q: Quant, rng: np.random.Generator, axis: int, *,
                  rotated: bool = False) -> Rounder:
    """A stateless rounder for evaluation: delayed scaling is replaced by the
    current tensor's own power-of-two scale, so evaluating never changes the
    amax history that training uses."""
    if q.scaling != "delayed":
        return make_rounder(q, rng, axis, rotated=rotated)
    from ..formats import get_format

    fmt = get_format(q.format)

    def current(x: np.ndarray) -> np.ndarray:
        amax = float(np.max(np.abs(x))) if x.size else 0.0
        if not np.isfinite(amax) or amax == 0:
            return round_to(x, fmt, q.mode, saturate=True)
        s = np.float32(2.0 ** np.floor(np.log2(fmt.max / amax)))
        return (round_to(x * s, fmt, q.mode, saturate=True) / s).astype(x.dtype)

    return current


# ----------------------------------------------------------------- the plain model
@dataclass(frozen=True)
class Roundings:
    """The three places of a layer that a policy may round (None: not rounded).

    ``weights`` and ``bias`` are the layer's parameters, ``out`` its output ``z``. A
    layer has three sets: the forward roundings of training (``q_weights``, ``q_act``),
    those of evaluation (stateless, see ``_eval_rounder``) and the gradient roundings
    (``g_wgrad`` for ``weights`` and ``bias``, ``g_actgrad`` for ``out``).

    >>> import numpy as np
    >>> from lowprec import round_to
    >>> layer = Layer(2, 1, np.random.default_rng(0), relu=False)
    >>> fp16 = Roundings(weights=lambda a: round_to(a, "fp16"))
    >>> z = layer(Tensor(np.ones((1, 2), np.float32)), rounds=fp16)  # z = h @ W_c + b
    >>> [t.op for t in z.parents], [t.op or "leaf" for t in z.parents[0].parents]
    (['matmul', ''], ['leaf', 'round_weights'])
    """

    weights: Rounder | None = None
    bias: Rounder | None = None
    out: Rounder | None = None
    #: What the layer's fprop / dgrad / wgrad GEMMs read (:mod:`lowprec.train.gemm`),
    #: None: the plain matmul of the stored operands.
    gemm: GemmRounders | None = None


NOWHERE = Roundings()


class Layer:
    """One fully connected layer: ``z = h @ W + b``, then ReLU unless ``relu=False``.

    ``W`` starts He-initialised (normal, variance ``2 / n_in``, drawn from ``rng``),
    ``b`` at zero, both float32 leaves of the graph. The roundings and counters a
    :class:`Network` attaches are empty for a plain :class:`MLP`.

    >>> import numpy as np
    >>> layer = Layer(3, 2, np.random.default_rng(0), relu=False)
    >>> layer(Tensor(np.zeros((5, 3), np.float32))).shape
    (5, 2)
    """

    def __init__(self, n_in: int, n_out: int, rng: np.random.Generator, *, relu: bool = True,
                 name: str = "fc") -> None:
        w = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        self.w = Tensor(w, requires_grad=True)
        self.b = Tensor(np.zeros(n_out, np.float32), requires_grad=True)
        self.relu, self.name = relu, name
        self.train_rounds = self.eval_rounds = self.grad_rounds = NOWHERE
        self.act_stats = SiteStats()     # what grad_rounds.out did this step
        self.weight_stats = SiteStats()  # what the weight and bias gradient roundings did

    def parameters(self) -> list[Tensor]:
        return [self.w, self.b]

    def __call__(self, h: Tensor, *, rounds: Roundings = NOWHERE, grads: Roundings = NOWHERE,
                 product: Product | None = None) -> Tensor:
        """The layer's output for the batch ``h``: values rounded where ``rounds`` says,
        gradients where ``grads`` says; ``product`` is the matmul (by default float32 in
        k order, the same bits on every machine: :mod:`lowprec._kernels.gemm`)."""
        w, b = self.w, self.b
        if rounds.weights is not None:
            w = round_value(w, rounds.weights, "round_weights")
        if rounds.bias is not None:
            b = round_value(b, rounds.bias, "round_weights")
        if grads.weights is not None:
            w = round_grad(w, grads.weights, "round_weight_grad")
        if grads.bias is not None:
            b = round_grad(b, grads.bias, "round_weight_grad")
        if rounds.gemm is not None:
            z = gemm(h, w, rounds.gemm, product) + b
        else:
            z = matmul(h, w, product or matmul_in_order) + b
        if rounds.out is not None:
            z = round_value(z, rounds.out, "round_activations")
        if grads.out is not None:
            z = round_grad(z, grads.out, "round_act_grad")
        return z.relu() if self.relu else z


class MLP:
    """Layers of the given widths (input first), ReLU between them and none after the last.

    >>> import numpy as np
    >>> MLP((4, 8, 3), np.random.default_rng(0)).layers[-1].relu
    False
    """

    def __init__(self, sizes: tuple[int, ...], rng: np.random.Generator) -> None:
        last = len(sizes) - 2
        self.layers = [Layer(n_in, n_out, rng, relu=i < last, name=f"fc{i + 1}")
                       for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes))]

    def parameters(self) -> list[Tensor]:
        """Every weight and bias, layer by layer: ``[W1, b1, W2, b2, ...]``."""
        return [p for layer in self.layers for p in layer.parameters()]

    def __call__(self, x: Tensor | np.ndarray) -> Tensor:
        h = x if isinstance(x, Tensor) else Tensor(x)
        for layer in self.layers:
            h = layer(h)
        return h


def _split_like(flat: np.ndarray, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """``flat``, the concatenation of the raveled ``arrays``, cut back into their shapes."""
    cuts = np.cumsum([a.size for a in arrays])[:-1]
    return [piece.reshape(a.shape) for piece, a in zip(np.split(flat, cuts), arrays)]


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def _constant(value: np.ndarray) -> Rounder:
    """A 'rounding' that returns ``value``, already rounded, whatever it is given."""
    return lambda _x: value


# ------------------------------------------------------------ the model of a policy
class Network(MLP):
    """An :class:`MLP` whose forward pass applies a policy's roundings.

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
        super().__init__(sizes, rng)
        self.policy = policy
        stored = policy.master if policy.master is not None else policy.weights
        # The initial weights, written in the stored format (fp32 holds every float32:
        # nothing to round, and no kernel to compile for a first run).
        if stored is not None and stored.format != "fp32":
            for p in self.parameters():
                p.data = round_to(p.data, stored.format).astype(np.float32)
        round_rng = rng if round_rng is None else round_rng
        self.eval_rng = np.random.default_rng(round_rng.integers(2**63))
        self.product = product_for(policy)
        self.record = record
        self.samples: dict[str, list[np.ndarray]] | None = None
        self._place_value_roundings(round_rng)
        self._place_gradient_roundings(round_rng)
        self._inputs_rounded = False  # see round_inputs

    def _place_value_roundings(self, rng: np.random.Generator) -> None:
        """Give every layer its forward roundings (fresh state per site), the input its own."""
        p = self.policy
        cast = p.master is not None and p.weights is not None
        wq = p.weights if cast else None  # master weights cast to the compute format
        bq = wq if wq is not None and wq.scaling == "none" else None
        aq = p.activations

        def fwd(q: Quant | None, axis: int = -1) -> Rounder | None:
            return make_rounder(q, rng, axis) if q is not None else None

        def ev(q: Quant | None, axis: int = -1) -> Rounder | None:
            return _eval_rounder(q, self.eval_rng, axis) if q is not None else None

        self.input_round, self.input_eval = fwd(aq), ev(aq)
        last = len(self.layers) - p.keep_last
        for i, layer in enumerate(self.layers):
            gq = p.gemm_quants(layer.name) if i < last else None
            # evaluation reads the fprop operands as training does, without changing state
            ge = None if gq is None else gemm_rounders(
                {k: v for k, v in gq.items() if k.startswith("fprop.")}, self.eval_rng,
                make=_eval_rounder)
            layer.train_rounds = Roundings(fwd(wq, 0), fwd(bq), fwd(aq),
                                           None if gq is None else gemm_rounders(gq, rng))
            layer.eval_rounds = Roundings(ev(wq, 0), ev(bq), ev(aq), ge)
        # An unscaled, deterministic cast of all parameters is one call (see cast_weights).
        self._cast_in_one_call = bq is not None and bq.mode != "stochastic"

    def _place_gradient_roundings(self, rng: np.random.Generator) -> None:
        """Give every layer its (watched) gradient roundings."""
        p = self.policy
        # Weight and bias gradients are leaves: nothing reads them between their rounding
        # and the optimizer. When that rounding keeps no state (no scaling), the node in the
        # graph only marks the spot, and finish_backward() rounds (and watches) all of them
        # in one call -- the same values, one call instead of 2n.
        gq = p.weight_grads
        self._deferred: Rounder | None = None
        self._deferred_q = gq or Quant("fp32")
        deferred = gq is None or gq.scaling == "none"
        if deferred and (gq is not None or self.record):
            self._deferred = make_rounder(gq, rng) if gq is not None else _identity
        marker: Rounder | None = _identity if gq is not None else None
        for layer in self.layers:
            w_grad: Rounder | None
            b_grad: Rounder | None
            if deferred:
                w_grad = b_grad = marker
            else:
                w_grad = self._grad_site(gq, rng, 0, "weight_grad", layer)
                b_grad = self._grad_site(gq, rng, -1, "bias_grad", layer)
            a_grad = self._grad_site(p.act_grads, rng, -1, "act_grad", layer)
            layer.grad_rounds = Roundings(w_grad, b_grad, a_grad)

    def _grad_site(self, q: Quant | None, rng: np.random.Generator, axis: int, kind: str,
                   layer: Layer) -> Rounder | None:
        """The gradient rounding ``q`` at one site, watched into the layer's counters."""
        rounder = make_rounder(q, rng, axis) if q is not None else _identity
        if not self.record:
            return rounder if q is not None else None
        key = f"{kind}/{layer.name}"

        def stats() -> SiteStats:
            return layer.act_stats if kind == "act_grad" else layer.weight_stats

        def sample(x: np.ndarray) -> None:
            if self.samples is not None and kind != "bias_grad":
                self.samples.setdefault(key, []).append(x)

        return watched(rounder, q or Quant("fp32"), stats, sample)

    def round_inputs(self, x: np.ndarray) -> np.ndarray:
        """The dataset ``x`` stored in the activation format, rounded once for the whole
        run when the rounding keeps no state (plain format, deterministic mode); forward()
        then takes it as it is. Otherwise ``x`` unchanged (forward rounds each batch)."""
        q = self.policy.activations
        if q is None or q.scaling != "none" or q.mode == "stochastic":
            return x
        self._inputs_rounded = True
        return round_to(x, q.format, q.mode)

    def cast_weights(self) -> list[Roundings]:
        """Each layer's training roundings, with its weights and bias already cast to the
        compute format by one ``round_to`` call over all parameters (the same values as
        one call per tensor; AMP caches its casts the same way)."""
        q = self.policy.weights
        assert q is not None
        data = [t.data for t in self.parameters()]
        low = _split_like(round_to(np.concatenate([a.ravel() for a in data]), q.format, q.mode),
                          data)
        return [replace(layer.train_rounds, weights=_constant(w), bias=_constant(b))
                for layer, w, b in zip(self.layers, low[0::2], low[1::2])]

    def finish_backward(self) -> None:
        """Round the weight and bias gradients, if deferred (see _place_gradient_roundings),
        and record them."""
        if self._deferred is None:
            return
        params = self.parameters()
        grads: list[np.ndarray] = []
        for t in params:
            if t.grad is None:
                raise ValueError("finish_backward() needs every parameter's gradient")
            grads.append(t.grad)
        before = np.concatenate([g.ravel() for g in grads])
        after = self._deferred(before)
        tiny = smallest_normal(self._deferred_q)
        for k, (b, a, t) in enumerate(zip(_split_like(before, grads), _split_like(after, grads),
                                          params)):
            t.grad = a
            if self.record:
                layer = self.layers[k // 2]
                layer.weight_stats.record(b, a, tiny)
                if self.samples is not None and k % 2 == 0:
                    self.samples.setdefault(f"weight_grad/{layer.name}", []).append(b)

    def reset_stats(self) -> None:
        """Zero every layer's counters (the runner calls this before each step)."""
        for layer in self.layers:
            layer.act_stats, layer.weight_stats = SiteStats(), SiteStats()

    def __call__(self, x: Tensor | np.ndarray, *, train: bool = True) -> Tensor:
        """Logits (or predictions) for the batch ``x``; ``train=False`` builds no
        gradient roundings and leaves scaling state alone."""
        h = x if isinstance(x, Tensor) else Tensor(x)
        first = self.input_round if train else self.input_eval
        if first is not None and not self._inputs_rounded:
            h = round_value(h, first, "round_input")
        if not train:
            rounds = [layer.eval_rounds for layer in self.layers]
        elif self._cast_in_one_call:
            rounds = self.cast_weights()
        else:
            rounds = [layer.train_rounds for layer in self.layers]
        for layer, r in zip(self.layers, rounds):
            h = layer(h, rounds=r, grads=layer.grad_rounds if train else NOWHERE,
                      product=self.product)
        return h

    forward = __call__
