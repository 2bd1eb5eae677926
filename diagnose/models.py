"""The report model's old import path, kept for ``diagnose.knowledge``: use ``diagnose.core``."""

from diagnose.core.models import *  # noqa: F403
from diagnose.core.models import CATEGORIES as CATEGORIES
