"""SavedModels: writing exports and answering --mode=predict from them.
Imports trainer.input_kinds and the packages below it.
"""
