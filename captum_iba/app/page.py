"""What an explanation with a page needs besides its scores: its methods'
scores looked up by name, a method's row of the page, the notebook's display
and the page written to a file (both from its ``to_html``)."""

from pathlib import Path
from typing import Any, Dict, Optional, Union

from captum_iba._utils.io import atomic_write_text

__all__ = ["Page"]


class Page:
    """A mix-in for an explanation whose ``to_html(pieces, full_page)`` makes
    its page and whose ``methods`` maps each method's name to its scores
    (:class:`~captum_iba.app.explanation.Explanation`, of a classifier or a
    causal LM alike)."""

    methods: Dict[str, Any]

    def _method(self, method: Optional[str]) -> Any:
        """The scores of ``method`` (any case; None: the first method's)."""
        if method is None:
            return next(iter(self.methods.values()))
        for name, result in self.methods.items():
            if name.lower() == method.lower():
                return result
        raise ValueError(f"no scores of {method!r}; have {list(self.methods)}")

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page (a whole HTML document, or a fragment for a notebook)."""
        raise NotImplementedError

    def _score_row(self, name: str, pieces: bool, **extra: Any) -> Any:
        """The page's row of ``name``: its words and scores, whether they are
        signed, what a score means and how it ran, with ``extra`` fields of
        :class:`~captum_iba.visualization.page.ScoreRow`."""
        from captum_iba.visualization.page import ScoreRow

        m = self.methods[name]
        return ScoreRow(
            method=name,
            words=self.tokens(pieces),  # type: ignore[attr-defined]
            scores=self.scores(name, pieces),  # type: ignore[attr-defined]
            signed=m.signed,
            meaning=m.meaning,
            details=self.details(name),  # type: ignore[attr-defined]
            **extra,
        )

    def _repr_html_(self) -> str:
        return self.to_html(full_page=False)

    def save_html(self, path: Union[str, Path], pieces: bool = False) -> Path:
        """Write the page to ``path`` (atomically); returns the path."""
        return atomic_write_text(Path(path), self.to_html(pieces))
