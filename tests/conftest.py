import sys, warnings
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).parent))
warnings.filterwarnings('ignore', message='.*torch.jit.script.*')

def pytest_addoption(parser):
    parser.addoption('--update-golden', action='store_true', help='rewrite the golden JSON files in tests/golden/')

@pytest.fixture
def update_golden(request): return request.config.getoption('--update-golden')
