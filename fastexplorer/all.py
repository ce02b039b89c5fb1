"The public API of fastexplorer: `from fastexplorer.all import *`"
from .core import *
from .probe import *
from .cli import digits_dls, digits_cnn, digits_learner
