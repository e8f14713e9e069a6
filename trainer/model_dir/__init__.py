"""The model_dir's records, which every other part reads: checkpoints, run files, the
training lease, the ledger, and what "better" means (MetricGoal).
Imports no other trainer package.
"""
