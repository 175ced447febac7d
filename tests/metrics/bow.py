"""A bag-of-words classifier whose degradation results are computed by hand,
the batch the metrics tests share, and the options they run with."""

from dataclasses import replace
from typing import NamedTuple

import torch
from torch import Tensor, nn

from captum_iba.metrics import DegradationOptions, degradation_test

PAD, CLS, SEP, MASK, UNK = 0, 1, 2, 3, 4
SPECIALS = [CLS, SEP, MASK]
VOCAB, C = 20, 3

#: The options of most tests: the batch's special and pad ids, deletion.
OPTIONS = DegradationOptions(special_token_ids=SPECIALS, pad_token_id=PAD)


class Tok:
    """The ids of a tokenizer, as DegradationOptions.for_tokenizer reads them."""

    pad_token_id, mask_token_id, unk_token_id = PAD, MASK, UNK
    all_special_ids = [PAD, CLS, SEP, MASK, UNK]


class BagOfWords(nn.Module):
    """logits = bias + sum over attended tokens of weight[token, segment]."""

    def __init__(self, seed: int = 0, pad_weight: float = 0.0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(VOCAB, 2, C, generator=g, dtype=torch.float64)
        w[PAD] = pad_weight
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(torch.randn(C, generator=g, dtype=torch.float64))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        seg = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        per_token = self.weight[input_ids, seg]  # (B, L, C)
        if attention_mask is not None:
            per_token = per_token * attention_mask[..., None].to(per_token.dtype)
        return self.bias + per_token.sum(1)


class NoMaskBagOfWords(BagOfWords):
    """Takes only input_ids: it sees (and weighs) padding."""

    def forward(self, input_ids):  # type: ignore[override]
        return super().forward(input_ids)


class Batch(NamedTuple):
    ids: Tensor
    mask: Tensor
    tt: Tensor
    scores: Tensor
    target: Tensor

    def rows(self, sl: slice) -> "Batch":
        return Batch(*(t[sl] for t in self))


def make_batch() -> Batch:
    """Two instances, the second right-padded; a pair in the first (segment 1
    after the first SEP)."""
    ids = torch.tensor(
        [
            [CLS, 5, 6, 7, SEP, 8, 9, 10, 11, SEP],
            [CLS, 12, 13, 5, 14, 15, SEP, PAD, PAD, PAD],
        ]
    )
    tt = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 1, 1], [0] * 10])
    scores = torch.tensor(
        [
            [9.0, 0.5, 3.0, -1.0, 9.0, 2.0, 0.1, 3.0, 1.5, 9.0],
            [9.0, 0.2, -0.3, 4.0, 1.0, 0.7, 9.0, 99.0, 99.0, 99.0],
        ]
    )
    return Batch(ids, (ids != PAD).long(), tt, scores, torch.tensor([0, 2]))


def counts(*levels: int, **changes) -> DegradationOptions:
    """:data:`OPTIONS` with levels counted in tokens."""
    return replace(OPTIONS, levels=levels, level_unit="count", **changes)


def run(model, batch: Batch, options: DegradationOptions = OPTIONS, **kwargs):
    """The test on ``batch`` (target, mask and segments unless overridden)."""
    call = dict(target=batch.target, attention_mask=batch.mask, token_type_ids=batch.tt)
    call.update(kwargs)
    return degradation_test(model, batch.ids, batch.scores, options=options, **call)


def softmax_p(logits, t):
    return torch.softmax(logits.double(), -1)[t].item()


def bow_prob(model, tokens, segments, t):
    """Probability of class t for an unpadded python list of tokens."""
    logits = model.bias.detach().clone()
    for tok, seg in zip(tokens, segments):
        logits = logits + model.weight.detach()[tok, seg]
    return softmax_p(logits, t)


def removal_order(scores, removable, morf=True):
    pos = [i for i in range(len(scores)) if removable[i]]
    sign = -1.0 if morf else 1.0
    return sorted(pos, key=lambda i: (sign * scores[i], i))


def expected_curve(model, batch: Batch, ks, mode="delete", morf=True, tt=None):
    """Hand computation of p(target) after removing the first k tokens.

    ``mode``: ``"delete"``, a replacement id, or a function of a removed token's
    (id, position) giving its stand-in."""
    tt = batch.tt if tt is None else tt
    out = []
    for b in range(batch.ids.shape[0]):
        row, segs, sc = batch.ids[b].tolist(), tt[b].tolist(), batch.scores[b].tolist()
        valid = [t != PAD for t in row]
        removable = [v and t not in SPECIALS for v, t in zip(valid, row)]
        order = removal_order(sc, removable, morf)
        stand_in = mode if callable(mode) else (lambda tok, i: mode)
        probs = []
        for k in ks[b]:
            gone = set(order[:k])
            if mode == "delete":
                toks = [t for i, t in enumerate(row) if valid[i] and i not in gone]
                sgs = [s for i, s in enumerate(segs) if valid[i] and i not in gone]
            else:
                toks = [
                    stand_in(t, i) if i in gone else t
                    for i, t in enumerate(row)
                    if valid[i]
                ]
                sgs = [s for i, s in enumerate(segs) if valid[i]]
            probs.append(bow_prob(model, toks, sgs, int(batch.target[b])))
        out.append(probs)
    return torch.tensor(out, dtype=torch.float64)
