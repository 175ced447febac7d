"""``captum-iba evaluate`` / ``attribute`` on a classifier: a corpus's
held-out split, every instance's class explained and tested
(:class:`~captum_iba.app.engine.CorpusJob`) on the corpus engine.

Before any weights load, ``--max-length``, the layers and the classes are
checked against the model's configuration; the default model (``--model``
not given) is fine-tuned, or found in the cache, by rank 0 first.
"""

from typing import Any, Dict

from captum_iba.app.corpus_task import DatasetTask, Prepared

__all__ = ["CLASSIFIER_CORPUS", "CLASSIFIER_MAX_LENGTH", "ClassifierCorpus"]

#: ``--max-length`` of a classifier when not given (a causal LM's prompts
#: are cut only when it is given).
CLASSIFIER_MAX_LENGTH = 128


class ClassifierCorpus(DatasetTask):
    """A classifier's corpus run."""

    def check(self, args: Any) -> Dict[str, Any]:
        """As a corpus's (:meth:`DatasetTask.check`), ``--max-length`` 's
        default given; ``--task`` refused (a context task explains a causal
        LM's answer)."""
        if getattr(args, "task", None) is not None:
            from captum_iba.app.context_corpus import on_classifier

            raise on_classifier(args)
        resolved = super().check(args)
        resolved["max_length"] = args.max_length or CLASSIFIER_MAX_LENGTH
        return resolved

    def prepare(self, args: Any, split: str) -> Prepared:
        """``--max-length``, the layers and the classes checked against the
        configuration; the warning of a default model trained on another
        corpus."""
        from captum_iba.app.checks import check_against_config, corpus_warning
        from captum_iba.app.command_parts import config_and_record
        from captum_iba.app.models import check_request_layers

        config, record = config_and_record(args.model, args.dataset)
        check_against_config(config, max_length=args.max_length)
        check_request_layers(args.request, config)
        return None, corpus_warning(record, args.dataset)

    def job(
        self, args: Any, world: Any, split: str, prepared: Any, settings: Dict
    ) -> Any:
        """The model on this rank's device, the scorers and the corpus."""
        from captum_iba.app import command_parts
        from captum_iba.app.checks import check_classes
        from captum_iba.app.data import load_dataset
        from captum_iba.app.engine import CorpusJob
        from captum_iba.app.engine.records import weights_digest
        from captum_iba.evaluation import get_preset

        if args.model is None and not world.is_main:
            world.barrier()  # rank 0 fine-tunes (or finds) the default model first
        model, tok = command_parts.model_and_tokenizer(args.model, args.dataset)
        if args.model is None and world.is_main:
            world.barrier()
        settings = dict(settings, weights=weights_digest(model))
        model.to(world.device)
        data = load_dataset(
            args.dataset, split, data_dir=args.data_dir, max_examples=args.n
        )
        target = getattr(args, "target", "label")
        check_classes(model.config, data.label_names, args.dataset, target)
        return CorpusJob(
            model=model,
            tokenizer=tok,
            data=data,
            scorers=_scorers(args, model, tok),
            settings=settings,
            preset=get_preset(args.setting),
            max_length=args.max_length,
            batch_size=args.batch_size,
            target=target,
            degradation=args.command == "evaluate" or args.degradation,
        )


def _scorers(args: Any, model: Any, tok: Any) -> Dict:
    """The scorers of a classifier's run: every method built once, by the
    harness's one resolver, from the checked request."""
    from captum_iba.app import command_parts
    from captum_iba.attr.text import resolve_layer
    from captum_iba.evaluation import Resources, build_scorers, get_preset

    def explainer(module: Any, objective: str = "distil") -> Any:  # iba-amortized's
        from captum_iba.app.amortized import cached_explainer

        return cached_explainer(
            model, tok, resolve_layer(model, module), args.dataset, True,
            args.data_dir, args.max_length, objective,
        )  # fmt: skip

    resources = Resources(
        model,
        tok,
        explainer=explainer,
        prior_data=command_parts.prior_data(args.request, args.dataset, args.data_dir),
        max_length=args.max_length,
    )
    preset = get_preset(args.setting)
    return build_scorers(args.request, resources, preset, kind=args.kind)


#: The classifier's corpus task (:func:`~captum_iba.app.cli_checks.corpus_task`).
CLASSIFIER_CORPUS = ClassifierCorpus()
