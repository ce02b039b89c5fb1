"""Bug zoo, family 2: the data, the optimiser and the flow of gradients. See `bugzoo.py`."""
from bugzoo import *
