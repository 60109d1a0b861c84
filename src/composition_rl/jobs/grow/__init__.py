"""MagicBeanStalk: grow hard seeds into problems calibrated to a target policy.

>>> from composition_rl.jobs.grow import GrowConfig
>>> GrowConfig().alpha_leaf, GrowConfig().alpha_parent, GrowConfig().compose_trials
(0.8, 0.625, 10)
"""

from composition_rl.jobs.grow.config import GrowConfig
from composition_rl.jobs.grow.run import GrowResult, grow, grow_seed
from composition_rl.jobs.grow.students import Students
from composition_rl.jobs.grow.teachers import TEACHERS, Item, TeacherError, build_teacher

__all__ = ["GrowConfig", "GrowResult", "Item", "Students", "TEACHERS", "TeacherError", "build_teacher", "grow",
           "grow_seed"]
