"The 'untouched' check itself: each kind of change it exists to catch makes it fail."
import random
import pytest, torch
from torch import nn
from untouched import Untouched

def _model():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    m.train(); m[1].eval()
    return m

CHANGES = {
    'hook left': lambda m: m[0].register_forward_hook(lambda *a: None),
    'mode': lambda m: m.train(),
    'buffer': lambda m: m[1].running_mean.add_(1),
    'parameter replaced': lambda m: setattr(m[0], 'weight', nn.Parameter(m[0].weight.detach().clone())),
    'requires_grad': lambda m: m[0].weight.requires_grad_(False),
    'attribute rebound': lambda m: setattr(m[2], 'inplace', True),
    'torch rng': lambda m: torch.rand(1),
    'python rng': lambda m: random.random(),
    'global hook': lambda m: nn.modules.module.register_module_forward_hook(lambda *a: None),
}

@pytest.mark.parametrize('change', CHANGES)
def test_untouched_catches(change):
    "`Untouched.check` fails after each kind of change"
    m = _model()
    u = Untouched(m)
    u.check()
    res = CHANGES[change](m)
    try:
        with pytest.raises(AssertionError): u.check()
    finally:
        if hasattr(res, 'remove'): res.remove()
