"""composition-rl: compose stale RLVR prompts into harder verifiable ones.

The public surface is the record type, the verbs and their config classes. Heavy pieces
(training, backends) are imported from their subpackages on demand.
"""

from composition_rl.records import Link, Problem

__version__ = "0.1.0"
__all__ = ["Link", "Problem", "__version__"]
