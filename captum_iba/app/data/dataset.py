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

    def __post_init__(self) -> None:
        """Checks the rows: texts are strings, labels ids of ``label_names``.

        Raises:
            ValueError: Naming the corpus, split and row of the first bad one.
        """
        where = f"{self.name}/{self.split}"
        n = len(self.texts)
        if len(self.labels) != n or (
            self.text_pairs is not None and len(self.text_pairs) != n
        ):
            raise ValueError(f"{where}: texts, pairs and labels differ in length")
        if not self.label_names:
            raise ValueError(f"{where}: no label names")
        k = len(self.label_names)
        columns = [("text", self.texts)]
        if self.text_pairs is not None:
            columns.append(("text pair", self.text_pairs))
        for what, values in columns:
            for i, text in enumerate(values):
                if not isinstance(text, str):
                    raise ValueError(f"{where}, row {i}: {what} is {text!r}, not text")
        for i, y in enumerate(self.labels):
            if isinstance(y, bool) or not isinstance(y, int) or not 0 <= y < k:
                raise ValueError(
                    f"{where}, row {i}: label {y!r} is not one of 0..{k - 1} "
                    f"({self.label_names})"
                )

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
