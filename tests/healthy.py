"""Bug zoo: healthy runs of real fastai tasks, trained sensibly on data they can learn. See `bugzoo.py`."""
from bugzoo import *
