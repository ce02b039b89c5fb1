import sys, warnings
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).parent))
warnings.filterwarnings('ignore', message='.*torch.jit.script.*')

def pytest_addoption(parser):
    parser.addoption('--update-golden', action='store_true', help='rewrite the golden JSON files in tests/golden/')

@pytest.fixture
def update_golden(request): return request.config.getoption('--update-golden')

@pytest.fixture
def fastai_amp_on_cpu(monkeypatch):
    """fastai's `MixedPrecision` pointed at the CPU: its autocast and loss scaler name CUDA, so on a machine without a GPU
    its mixed-precision paths run only this way"""
    import torch, fastai.callback.fp16 as F
    monkeypatch.setattr(F, 'autocast', lambda _, dtype: torch.autocast('cpu', dtype=dtype))
    monkeypatch.setattr(F, 'GradScaler', lambda _, **kw: torch.amp.GradScaler('cpu', **kw))
