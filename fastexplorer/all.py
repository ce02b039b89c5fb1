"The public API of fastexplorer: `from fastexplorer.all import *`"
from .core import *
from .probe import *
from .export import *
from .stats import *
from .landscape import *
from .explorer import *
from .cli import digits_dls, digits_cnn, digits_learner
from .record import *
