"The 'untouched' check: a snapshot of everything a user owns in a model, compared after a public call."
import random
import numpy as np, torch
from torch import nn

_HOOKS = ('_forward_hooks', '_forward_pre_hooks', '_backward_hooks', '_backward_pre_hooks', '_state_dict_hooks',
          '_load_state_dict_pre_hooks', '_forward_hooks_with_kwargs', '_forward_pre_hooks_with_kwargs')

def _globals():
    from torch.nn.modules import module as M
    return tuple(len(getattr(M, n)) for n in dir(M) if n.startswith('_global_') and n.endswith('hooks'))

class Untouched:
    "Snapshot `model` (hooks, modes, tensors, parameter identity, attributes) and the RNG states; `check()` asserts none changed"
    def __init__(self, model:nn.Module):
        self.model = model
        self.mods = list(model.named_modules(remove_duplicate=False))
        self.hooks = [(n, {h: len(getattr(m, h, {})) for h in _HOOKS}) for n,m in self.mods]
        self.modes = [(n, m.training) for n,m in self.mods]
        self.classes = [(n, type(m)) for n,m in self.mods]
        self.attrs = [(n, {k: v for k,v in vars(m).items() if k not in _HOOKS}) for n,m in self.mods]
        self.state = {k: v.detach().clone() for k,v in model.state_dict(keep_vars=True).items()
                      if not isinstance(v, nn.parameter.UninitializedTensorMixin)}
        self.params = [(n, p, p.dtype, p.requires_grad, p.device) for n,p in model.named_parameters(remove_duplicate=False)]
        self.rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
        self.global_hooks = _globals()

    def check(self):
        m = self.model
        mods = list(m.named_modules(remove_duplicate=False))
        assert [n for n,_ in mods] == [n for n,_ in self.mods], "module tree changed"
        assert [(n, type(o)) for n,o in mods] == self.classes, "a module changed class"
        hooks = [(n, {h: len(getattr(o, h, {})) for h in _HOOKS}) for n,o in mods]
        assert hooks == self.hooks, f"hooks left or removed: {[a for a,b in zip(hooks, self.hooks) if a != b][:3]}"
        assert [(n, o.training) for n,o in mods] == self.modes, \
            f"modes changed: {[(a, b) for a,b in zip([(n, o.training) for n,o in mods], self.modes) if a != b][:3]}"
        for (n,o),(_,saved) in zip(mods, self.attrs):
            now = {k: v for k,v in vars(o).items() if k not in _HOOKS}
            assert now.keys() == saved.keys(), f"attributes of {n!r} added or removed: {now.keys() ^ saved.keys()}"
            assert all(now[k] is v for k,v in saved.items()), \
                f"attributes of {n!r} rebound: {[k for k,v in saved.items() if now[k] is not v]}"
        sd = m.state_dict()
        for k,v in self.state.items():
            assert torch.equal(sd[k], v), f"tensor {k!r} changed"
        params = [(n, p, p.dtype, p.requires_grad, p.device) for n,p in m.named_parameters(remove_duplicate=False)]
        assert len(params) == len(self.params) and all(a[0] == b[0] and a[1] is b[1] and a[2:] == b[2:]
                                                       for a,b in zip(params, self.params)), "parameters replaced or changed"
        torch_rng, np_rng, py_rng = self.rng
        assert torch.equal(torch.get_rng_state(), torch_rng), "torch RNG state changed"
        assert np.array_equal(np.random.get_state()[1], np_rng), "numpy RNG state changed"
        assert random.getstate() == py_rng, "python RNG state changed"
        assert _globals() == self.global_hooks, "global module hooks left"
