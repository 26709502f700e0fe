"""Training a small network under precision policies, instrumented (``lowprec demo``).

>>> from lowprec.train import train
>>> r = train("bf16-master", steps=20, eval_every=10)
>>> sorted(r.summary)[:3]
['final_acc', 'final_loss', 'final_loss_scale']
"""

from .data import TASKS, Task, get_task
from .memory import MemoryTable, memory, transformer_layer
from .optim import SGD, Adam
from .policy import POLICIES, Policy, Quant, get_policy, list_policies
from .results import RunResult, load_run, save_run
from .runner import train
from .scaler import GradScaler, StaticScaler

__all__ = [
    "POLICIES",
    "SGD",
    "TASKS",
    "Adam",
    "GradScaler",
    "MemoryTable",
    "Policy",
    "Quant",
    "RunResult",
    "StaticScaler",
    "Task",
    "get_policy",
    "get_task",
    "list_policies",
    "load_run",
    "memory",
    "save_run",
    "train",
    "transformer_layer",
]
