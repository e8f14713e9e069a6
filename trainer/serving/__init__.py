"""SavedModels: writing exports and answering --mode=predict from them."""
