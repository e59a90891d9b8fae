"""Both backends give the training loop what harness.backend.StepBackend declares."""

import inspect

from scalestudy.harness.backend import StepBackend
from scalestudy.harness.megatron_backend.trainer import MegatronTrainer
from scalestudy.harness.trainer import Trainer


def test_both_backends_have_the_declared_methods_with_their_signatures():
    for name in ("step", "global_loss"):
        declared = list(inspect.signature(getattr(StepBackend, name)).parameters)
        for backend in (Trainer, MegatronTrainer):
            assert list(inspect.signature(getattr(backend, name)).parameters) == declared, (backend.__name__, name)
    for backend in (Trainer, MegatronTrainer):  # cfg: set in __init__, read by the loop for FLOPs and vocab size
        assert "self.cfg =" in inspect.getsource(backend.__init__), backend.__name__
