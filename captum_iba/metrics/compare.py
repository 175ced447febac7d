r"""Several methods' degradation results side by side (Figure 1 and Table 1).

:func:`compare` checks that the results share their removal levels (and warns
when they were not computed on the same instances), puts each method's
:func:`~captum_iba.metrics.aggregates.normalized_drop` on one floor :math:`m` (the
lowest fully degraded mean probability across the methods), and returns a
:class:`Comparison` that prints as a Markdown table.
"""

import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch
from captum.log import log_usage
from torch import Tensor

from captum_iba.metrics import aggregates
from captum_iba.metrics.aggregates import normalized_drop
from captum_iba.metrics.result import DegradationResult

__all__ = ["Comparison", "compare"]


@dataclass
class Comparison:
    """Several degradation results side by side (Figure 1 and Table 1).

    Attributes:
        names (list[str]): The methods, in the order given.
        m (float): The floor of the normalised drop: the lowest last-level mean
            probability across the methods.
        normalized_curves (dict[str, Tensor]): ``(K + 1,)`` normalised drop
            ``(p - m) / (o - m)`` per method, level 0 included.
        rows (list[dict]): One summary row per method (see
            :meth:`DegradationResult.summary`).
        levels (list): The removal levels shared by the results.
    """

    names: List[str]
    m: float
    normalized_curves: Dict[str, Tensor]
    rows: List[Dict[str, Any]]
    levels: List[Union[float, int]]

    def _first_level(self) -> str:
        first = self.levels[0] if self.levels else None
        return f"{100 * first:.1f} %" if isinstance(first, float) else f"{first} tok."

    def _columns(self) -> List[Tuple[str, str, str]]:
        """``(summary key, head, legend)`` of each registered aggregate with a
        column, in registration order."""
        first = self._first_level()
        out = []
        for entry in aggregates.registered():
            facts = entry.facts
            if facts["column"] is None:
                continue
            label = facts["column"].format(first=first)
            mark = aggregates.BETTER.get(facts["better"])
            head = f"{label} {mark}" if mark else label
            legend = facts["legend"].format(first=first)
            out.append((entry.name, head, f"{label}: {legend}"))
        return out

    def to_markdown(self, digits: int = 3) -> str:
        """A Markdown table: the method, its instances and a column per
        registered aggregate (first-level drop, AOPC, comprehensiveness,
        sufficiency, log-odds, ...); each column's better direction marked (↑
        higher is better, ↓ lower is better), the columns explained by
        :meth:`legend`.

        Args:
            digits (int): Decimal places. Default 3.

        Returns:
            str: The table, one row per method in the order given.
        """
        columns = self._columns()
        head = " | ".join(["method", "n"] + [c[1] for c in columns])
        lines = [f"| {head} |", "|---|---:|" + "---:|" * len(columns)]

        def fmt(x: Optional[float]) -> str:
            return "n/a" if x is None else f"{x:.{digits}f}"

        for row in self.rows:
            cells = [str(row["method"]), str(row["num_instances"])]
            cells += [fmt(row.get(key)) for key, _, _ in columns]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def legend(self) -> str:
        """What each column of :meth:`to_markdown` means, in one paragraph.

        Returns:
            str: The legend (the formulas: docs/metrics.rst).
        """
        sentences = ["n: instances."] + [c[2] for c in self._columns()]
        sentences.append(
            "↑ higher is better, ↓ lower is better; rows in the order asked."
        )
        return " ".join(sentences)

    def curves_markdown(self, digits: int = 3) -> str:
        """A Markdown table of the normalised curves (one row per method).

        Args:
            digits (int): Decimal places. Default 3.

        Returns:
            str: The table.
        """
        cols = ["0"] + [
            f"{100 * lv:.1f} %" if isinstance(lv, float) else str(lv)
            for lv in self.levels
        ]
        lines = [
            "| method | " + " | ".join(cols) + " |",
            "|---|" + "---:|" * len(cols),
        ]
        for name in self.names:
            vals = " | ".join(f"{v:.{digits}f}" for v in self.normalized_curves[name])
            lines.append(f"| {name} | {vals} |")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()


@log_usage()
def compare(
    results: Mapping[str, DegradationResult], m: Optional[float] = None
) -> Comparison:
    """Compare several methods' degradation results (Figure 1 / Table 1).

    The normalised drop is ``d = (p - m) / (o - m)`` with ``o`` each result's mean
    original probability and ``m`` the minimum, across the methods, of the fully
    degraded (last-level) mean probability, as in the paper.

    Args:
        results (Mapping[str, DegradationResult]): Method name to result. They should
            share instances, targets and levels; a warning is given when the original
            probabilities differ, an error when the levels differ.
        m (float, optional): Override the floor.

    Returns:
        Comparison: Normalised curves, summary rows, and a Markdown table
        (:meth:`Comparison.to_markdown`).

    Raises:
        ValueError: If ``results`` is empty or the results' levels differ.
    """
    if not results:
        raise ValueError("compare needs at least one result")
    names = list(results)
    first = results[names[0]]
    for name in names[1:]:
        res = results[name]
        if list(res.levels) != list(first.levels) or res.settings.get(
            "level_unit"
        ) != first.settings.get("level_unit"):
            raise ValueError(
                f"results '{names[0]}' and '{name}' use different removal levels"
            )
        if res.num_instances != first.num_instances or not torch.allclose(
            res.original_probs, first.original_probs, atol=1e-5
        ):
            warnings.warn(
                f"results '{names[0]}' and '{name}' differ in their original "
                "probabilities: they were not computed on the same instances/targets",
                stacklevel=2,
            )
    drops, m = normalized_drop(
        [results[n].full_curve for n in names],
        m,
        [results[n].original_probability for n in names],
    )
    curves = dict(zip(names, drops))
    rows = []
    for n in names:
        row = results[n].summary()
        row["method"] = n
        rows.append(row)
    return Comparison(
        names=names,
        m=float(m),
        normalized_curves=curves,
        rows=rows,
        levels=list(first.levels),
    )
