"""The eval job: its checkpoint claims, export policies, waiting for the trainer, ledger reports.
Imports trainer.usr_dir, trainer.api, trainer.serving and the packages below them.
"""
