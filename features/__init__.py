"""What a table's columns mean, on both sides of a record: the kinds of features a schema entry
gives a model (model_features), dates (iso_dates, date_parts) and free text (free_text).

input_fns/ writes and parses records by these rules and models/ builds feature columns by them,
so they live here, where both may import them. Imports only common.
"""
