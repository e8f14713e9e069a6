"""The eval job: its ledger, the one "better" (MetricGoal), export policies, the pair protocol."""
