"""The eval job: its checkpoint claims, export policies, waiting for the trainer, ledger reports."""
