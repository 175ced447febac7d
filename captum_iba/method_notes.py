"""What was measured of a registered method that its user should know
before running it, read by ``--help`` (:mod:`captum_iba.app.help`) beside
the method's summary; torch-free, like the registry.

:data:`EXPERIMENTAL` (issue 76): a learned method whose measured
faithfulness on a kind of model is at random's level is marked experimental
for that kind, with the measured figure in one short clause and the page
that reports it. The figures are SmolLM2's report splits (AOPC of the
degradation test; docs/_generated/llm_amortized_report.rst, from the
records in ``experiments/llm_results``). On classifiers ``iba-amortized`` is
measured above random (docs/amortized.rst) and is not marked.
"""

from types import MappingProxyType
from typing import Mapping

__all__ = ["EXPERIMENTAL"]

#: Method name (as registered) -> kind of model (``"classifier"``,
#: ``"causal-lm"``) -> the measured figure, for each kind on which the
#: method is experimental.
EXPERIMENTAL: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "iba-amortized": {
            "causal-lm": "at random's level on the prompt tasks (SmolLM2, "
            "fitted on the task's 128 prompts: SST-2 AOPC .081 vs random's "
            ".091, AG News .081 vs .089; below random on RTE; "
            "docs/amortized.rst)",
        },
        "at2": {
            "causal-lm": "at or just above random's level on the prompt "
            "tasks' words (SmolLM2, trained on the task's 128 prompts: SST-2 "
            "AOPC .100 vs random's .091, AG News .110 vs .089; "
            "docs/amortized.rst); the anchor on contexts (docs/context.rst)",
        },
    }
)
