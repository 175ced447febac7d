"""The base class of a method that runs one of Captum's attribution classes,
whatever the model.

Each of Captum's methods the package registers - ``IG``, ``LIME``,
``LOO``/``ablation``, ``kernel-shap``, ``shapley``, ``saliency``,
``input-x-gradient``, ``occlusion``, ``grad-x-act`` - is one class, a
:class:`CaptumPromptScorer`, with one hook: it describes the run
(:class:`~captum_iba.attr.rows.CaptumRun`: Captum's class, its arguments and
options) and the rows run it (:meth:`Rows.captum
<captum_iba.attr.rows.Rows.captum>`): a classifier's read the model directly,
a causal LM's through Captum's LLM API, which replaces the method's forward by
the answer's log-probability (:mod:`~captum_iba.attr._llm_captum`). The
method never learns which kind it explains; what differs is the kind's.
"""

from typing import Any, Mapping, Optional, Union

from torch import Tensor

from captum_iba.attr.rows import CaptumRun, Rows, RowScores
from captum_iba.evaluation.scorers import TokenScorer

__all__ = ["CaptumPromptScorer"]


class CaptumPromptScorer(TokenScorer):
    """Base class of a method run on one of Captum's classes (see the module
    docstring). A subclass describes its run (:meth:`_captum_run`); the
    kinds it explains are its registry entry's.
    """

    #: What a causal LM's ``settings["captum"]`` records (default: the run's
    #: Captum class's name).
    prompt_label: str = ""
    prompt_meaning = (
        "log-probability of the answer the token adds (+) or takes away (-)"
    )
    #: Seed of each row's draws (a subclass sets it).
    seed: Optional[int] = 0

    def _refuse_unread(self, **given: bool) -> None:
        """Refuses the arguments (True: given a value other than the
        default) that the model's kind's runner does not read
        (:meth:`~captum_iba.attr.kinds.ModelKind.refuse_unread`)."""
        self.model_kind.refuse_unread(self.name, type(self).__name__, given)

    def _record(self, own: Mapping[str, Any], n_samples: Optional[int] = None) -> None:
        """Records the run in ``settings``, as the model's kind's runner
        states it (``own``: where the model is read directly)."""
        label = self.prompt_label or self._captum_run().method.__name__
        self.settings.update(
            self.model_kind.captum_settings(
                label, self.pad_token_id, own, n_samples, self.seed
            )
        )

    def _captum_run(self) -> CaptumRun:
        """The run on Captum's class (a subclass describes it)."""
        raise NotImplementedError

    def _scores(self, rows: Rows) -> Union[Tensor, RowScores]:
        return rows.captum(self._captum_run())
