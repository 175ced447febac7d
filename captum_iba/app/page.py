"""What every explanation with a page shares: the notebook's display and the
page written to a file, both from its ``to_html``."""

from pathlib import Path
from typing import Union

from captum_iba._utils.io import atomic_write_text

__all__ = ["Page"]


class Page:
    """A mix-in for an explanation whose ``to_html(pieces, full_page)`` makes
    its page (:class:`~captum_iba.app.explanation.Explanation`,
    :class:`~captum_iba.app.llm_explanation.AnswerExplanation`)."""

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page (a whole HTML document, or a fragment for a notebook)."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return self.to_html(full_page=False)

    def save_html(self, path: Union[str, Path], pieces: bool = False) -> Path:
        """Write the page to ``path`` (atomically); returns the path."""
        return atomic_write_text(Path(path), self.to_html(pieces))
