r"""AT2's head weights taught by IBA (issue 52): amortized IBA that reads the
response's attention, fitted without a single ablated prompt.

AT2 (Cohen-Wang et al. 2025; :mod:`captum_iba_lab.at2`) scores a
source :math:`s` by the attention the response pays to its tokens, each
attention head :math:`h` weighted by a weight :math:`\theta_h` learned once
per model: :math:`\hat a_s = \sum_h \theta_h F_{s,h}`, where :math:`F_{s,h}`
is head :math:`h`'s attention from the response's tokens (their mean) to the
source's tokens (their sum). Its trainer fits :math:`\theta` on ablations:
per training example, 32 random halves :math:`m \in \{0, 1\}^S` of the
sources, each a forward pass of the ablated prompt giving the response's
log-probability :math:`y_m`, and the loss is the negative Pearson
correlation, over the ablations, of :math:`\sum_s m_s \hat a_s` and
:math:`y_m`.

Here the outcome of an ablation is **IBA's linear prediction of it**,
:math:`y_m = \sum_s m_s t_s`, with :math:`t_s` the source's score by one
``iba-deletion`` step (the log-odds of its largest mask weight,
``logit-max``; docs/context.rst) - the teacher a context explainer is
distilled from (:mod:`captum_iba_lab.context_fit`). No ablated prompt is
run: a training example costs its response, one deletion step (a forward and
a backward pass) and AT2's features (one forward pass), against AT2's
response, 32 forward passes and features. The fit itself is AT2's own
trainer, unchanged (:func:`fit_taught`), and the weights are saved in AT2's
format, so :class:`~captum_iba_lab.at2.AT2Scorer` explains with them
at AT2's cost (``experiments/teach_at2.py``, docs/amortized.rst).
"""

from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from captum_iba._utils.io import PathLike
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.evaluation.iba import ONE_STEP_POOLING, one_step_deletion
from captum_iba_lab.at2 import (
    AT2Scorer,
    find_at2_weights,
    import_at2,
    model_fingerprint,
    read_task,
)
from captum_iba_lab.at2_model import model_as_found, model_type_of

__all__ = [
    "TEACHER",
    "TEACHER_POOLING",
    "TaughtHeadsScorer",
    "feature_extractor",
    "fit_taught",
    "save_at2_weights",
    "source_features",
    "taught_outcomes",
    "teacher_scorer",
]

#: The teacher's name (kept in the weights' extras and file name).
TEACHER = "iba-deletion-steps1"
#: How the teacher's token masks pool to its source scores.
TEACHER_POOLING = ONE_STEP_POOLING
#: The teacher: one ``iba-deletion`` step.
teacher_scorer = one_step_deletion


def save_at2_weights(
    estimator: Any, model: Any, path: PathLike, extras: Dict[str, Any]
) -> Any:
    """Save AT2's head weights (``estimator``) in AT2's format, with the
    model's fingerprint (which :func:`~captum_iba_lab.at2.load_at2`
    checks) and ``extras``; returns ``estimator``."""
    meta = dict(extras, model=model_fingerprint(model))
    meta.setdefault("model_name", str(getattr(model, "name_or_path", "")))
    estimator.save(Path(path), extras=meta)
    return estimator


def source_features(
    model: Any, tokenizer: Any, batch: PromptBatch, row: int, chat: bool = True
) -> Tensor:
    r"""AT2's features of row ``row`` 's sources: :math:`F_{s,h}`, the mean
    over the response's tokens of each head's attention summed over the
    source's tokens (what AT2's trainer pools them to).

    Args:
        model: A causal LM of a family AT2 knows.
        tokenizer: Its fast tokenizer.
        batch (PromptBatch): Prompts with their responses and sources
            (:func:`~captum_iba.evaluation.sources.with_sources`).
        row (int): The row.
        chat (bool): The prompt as a user turn of the chat template, else
            plain text (as the batch has it).

    Returns:
        Tensor: ``(S, layers x heads)`` float32.

    Raises:
        ValueError: When AT2's task reads the prompt or response as other
            tokens than the batch (it re-encodes the decoded response), or
            for a text longer than a sliding-window model's window (AT2
            recomputes the attention with a full causal mask);
            :func:`~captum_iba_lab.at2.read_task`.
    """
    at2 = import_at2()
    real = batch.attention_mask[row].bool().cpu()
    ids = batch.input_ids[row].cpu()[real].tolist()
    laid = (batch.prompts[row], batch.spans[row], chat)
    with model_as_found(model), torch.no_grad():
        task, start, end = read_task(
            at2, model, tokenizer, laid, batch.answer_ids(row), ids
        )
        per = feature_extractor(model)(task, start, end).float()  # (R, N, F)
        return torch.stack(
            [per[:, s:e].sum(1).mean(0) for s, e in task.source_token_ranges]
        ).cpu()


def feature_extractor(model: Any) -> Any:
    """AT2's attention features of ``model`` 's heads (every layer's), as
    ``experiments/train_at2.py`` trains AT2 on them."""
    cfg = model.config
    return import_at2().AT2FeatureExtractor(
        cfg.num_hidden_layers, cfg.num_attention_heads, model_type=model_type_of(model)
    )


def taught_outcomes(
    features: np.ndarray, teacher: np.ndarray, masks: int, rng: np.random.Generator
) -> Tuple[np.ndarray, np.ndarray]:
    """One example's training rows in AT2's store layout: ``masks`` random
    halves ``m`` of its sources, AT2's features of each (``(2m - 1) F``, as
    its trainer keeps them) and the teacher's predicted outcome ``m t``.

    Returns:
        (ndarray, ndarray): ``(1, masks, F)`` float16 and ``(1, masks)``.
    """
    m = rng.random((masks, len(teacher))) < 0.5
    rows = ((m * 2 - 1) @ np.asarray(features, dtype=np.float64))[None]
    return rows.astype(np.float16), (m @ np.asarray(teacher, np.float64))[None]


def fit_taught(
    features: Sequence[np.ndarray],
    teachers: Sequence[np.ndarray],
    extractor: Any,
    masks: int = 32,
    seed: int = 0,
    iterations: int = 1000,
) -> Any:
    """AT2's estimator fitted by AT2's own trainer (its loss, Adam, schedule,
    batches of up to 512 examples, L1 normalisation) on the teacher's
    outcomes (:func:`taught_outcomes`) instead of ablations.

    Args:
        features (sequence of ndarray): Per example, ``(S, F)``
            (:func:`source_features`).
        teachers (sequence of ndarray): Per example, the teacher's ``(S,)``
            source scores.
        extractor: AT2's feature extractor of the model
            (:func:`feature_extractor`; ``F`` its features).
        masks (int): Random halves per example. Default 32 (AT2's ablations).
        seed (int): Of the halves and the trainer's batches. Default 0.
        iterations (int): The trainer's Adam steps. Default 1000 (AT2's).

    Returns:
        AT2's ``LinearScoreEstimator``.

    Raises:
        ValueError: For no example, or features and teachers that differ in
            number or sources.
    """
    if not features or len(features) != len(teachers):
        raise ValueError(
            f"fit_taught needs as many features as teachers (>= 1); got "
            f"{len(features)} and {len(teachers)}"
        )
    for i, (f, t) in enumerate(zip(features, teachers)):
        if np.shape(f)[0] != np.shape(t)[0]:
            raise ValueError(
                f"example {i}: {np.shape(f)[0]} sources' features, "
                f"{np.shape(t)[0]} teacher scores"
            )
    at2 = import_at2()
    rng = np.random.default_rng(seed)
    rows = [taught_outcomes(f, t, masks, rng) for f, t in zip(features, teachers)]
    trainer = _trainer(at2)([r[0] for r in rows], [r[1] for r in rows], extractor)
    np.random.seed(seed)
    torch.manual_seed(seed)
    with torch.enable_grad():
        return trainer.train(
            num_iterations=iterations,
            batch_size=min(len(rows), 512),
            device="cpu",
            print_every=iterations,
        )


def _trainer(at2: Any) -> type:
    """AT2's trainer reading its rows from memory instead of its store."""

    class TaughtTrainer(at2.AT2Trainer):
        def __init__(self, feats: List[Any], outs: List[Any], extractor: Any):
            self.feature_extractor = extractor
            self.num_masks = outs[0].shape[-1]
            self.dataset = list(range(len(feats)))
            self._rows = list(zip(feats, outs))

        @property
        def task_datas(self) -> Dict[int, Dict[str, int]]:
            return {i: {"num_targets": 1} for i in self.dataset}

        def get_features_and_outputs(self, i: int) -> Tuple[Any, Any]:
            return self._rows[i]

    return TaughtTrainer


class TaughtHeadsScorer(AT2Scorer):
    """``iba-heads``: AT2's scores of a context's sources (and tokens) with
    head weights taught by one ``iba-deletion`` step (module docstring), at
    AT2's cost: one forward pass for the response's attention.

    Args:
        model: A causal LM of a family AT2 knows.
        heads (str, Path or Callable, optional): The taught weights' file, or
            a function returning it (e.g. one that teaches them first when
            none are cached, :func:`~captum_iba_lab.context_heads.
            cached_heads`). None: those cached for the model with the most
            contexts (:func:`~captum_iba_lab.at2.find_at2_weights`).
        **kwargs: :class:`~captum_iba_lab.at2.AT2Scorer` 's.

    Raises:
        ImportError: Without AT2's package (naming the install command).
        FileNotFoundError: When none are cached for the model (naming the
            command that teaches them).
        ValueError: For weights that are not taught by IBA, or that were
            taught for another model.
    """

    # no shared resource since the lab (the product's resource ``heads`` went
    # with it): the weights are given (``heads=``) or found in the cache
    needs = ()
    models = ("causal-lm",)
    prompt_meaning = (
        "the response's attention to the token through AT2's head weights taught "
        "by one iba-deletion step (a source's score: the sum over its tokens)"
    )
    meaning = prompt_meaning

    def __init__(
        self,
        model: Any,
        heads: Union[None, PathLike, Callable[[], PathLike]] = None,
        **kwargs: Any,
    ) -> None:
        import_at2()  # its package named before the weights are looked for
        weights = heads() if callable(heads) else heads
        if weights is None:
            weights = find_at2_weights(model, teacher=TEACHER)
        super().__init__(model, weights=weights, **kwargs)
        teacher = self.estimator.kwargs.get("extras", {}).get("teacher")
        if teacher != TEACHER:
            raise ValueError(
                f"iba-heads: the weights {weights} are not taught by {TEACHER} "
                f"(theirs: {teacher or 'ablations, AT2 own'}); use the method at2 "
                "for AT2's own weights"
            )
        self.settings.update(teacher=teacher)
