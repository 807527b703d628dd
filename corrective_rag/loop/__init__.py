"""The corrective loop: iteration stages, lanes, call mode, stop rule, budget, refinement.

The orchestrator and its budget are :class:`corrective_rag.CorrectiveRAGOrchestrator` and
:class:`corrective_rag.Budget` (their home is the root); here: the lane policy, :class:`Lanes`.
Start reading at :func:`corrective_rag.loop.iteration.iterate` (docs/loop.md).
"""

from corrective_rag.loop.lanes import Lanes

__all__ = ["Lanes"]
