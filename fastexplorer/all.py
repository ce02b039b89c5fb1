"The public API of fastexplorer: `from fastexplorer.all import *`"
from . import quiet_fastai
quiet_fastai()
from .formats import *
from .console import Verdicts, Console
from .chunks import CorruptSteps
from .core import *
from .hooks import *
from .state import *
from .batch import *
from .pipeline import *
from .probe import *
from .history import *
from .export import *
from .run import *
from .stepdb import *
from .stepread import *
from .stepseries import *
from .layers import *
from .reduce import *
from .units import *
from .stats import *
from .params import *
from .custom import *
from .heatmaps import *
from .distributed import *
from .steps import *
from .training import *
from .alerts import *
from .contract import *
from .inputscale import *
from .failures import *
from .preflight import *
from .targets import *
from .course import *
from .losswatch import *
from .settle import *
from .callback import *
from .explore import *
from .landscape import *
from .legacy import *
from .app import *
from .explorer import *
from .cli import digits_dls, digits_cnn, digits_learner
from .record import *
