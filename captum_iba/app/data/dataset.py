"""The in-memory form of a labelled split that every loader returns."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence


@dataclass
class TextClassificationData:
    """A labelled text-classification split held in memory.

    Attributes:
        texts (List[str]): The (first) input texts.
        text_pairs (Optional[List[str]]): The second texts of sentence-pair
            tasks (RTE, MNLI), aligned with ``texts``; ``None`` otherwise.
        labels (List[int]): Integer labels in ``0 .. len(label_names) - 1``.
        label_names (List[str]): Human-readable name of each label id.
        name (str): Canonical corpus name, e.g. ``"sst2"``.
        split (str): Canonical split name, e.g. ``"dev"``.
        notes (str): Free-text provenance notes (how a split was made, what was
            subsampled or cleaned). Report them together with any result.
    """

    texts: List[str]
    text_pairs: Optional[List[str]]
    labels: List[int]
    label_names: List[str]
    name: str
    split: str
    notes: str = ""
    extra: Dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_labels(self) -> int:
        """int: Number of classes."""
        return len(self.label_names)

    @property
    def is_pair(self) -> bool:
        """bool: Whether this is a sentence-pair task."""
        return self.text_pairs is not None

    def subset(
        self, indices: Sequence[int], note: str = ""
    ) -> "TextClassificationData":
        """Returns a new object holding only the rows at ``indices``.

        Args:
            indices (Sequence[int]): Row indices, in the order wanted.
            note (str, optional): Text appended to ``notes``.

        Returns:
            TextClassificationData: The subset.
        """
        idx = list(indices)
        notes = self.notes
        if note:
            notes = f"{notes} {note}".strip()
        return TextClassificationData(
            texts=[self.texts[i] for i in idx],
            text_pairs=(
                None if self.text_pairs is None else [self.text_pairs[i] for i in idx]
            ),
            labels=[self.labels[i] for i in idx],
            label_names=list(self.label_names),
            name=self.name,
            split=self.split,
            notes=notes,
            extra=dict(self.extra),
        )
