"""The application layer: data, fine-tuning, models, reproduction and the CLI.

The core (:mod:`captum_iba.attr`, :mod:`captum_iba.metrics`,
:mod:`captum_iba.evaluation`, :mod:`captum_iba.visualization`) never imports it.
"""
