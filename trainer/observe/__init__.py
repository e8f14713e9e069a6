"""Seeing a run: status, step timing, TensorBoard hparams.
Imports trainer.config, trainer.evaluation and the packages below them.
"""
