"""Seeing a run: status, step timing, TensorBoard hparams."""
