"""Tables: CSV files and Excel workbooks read as they were written, tf.Example records described
by a schema, the schema itself (column types, statistics, label classes), and the table records
the canned models read. Imports input_fns.records, features and common.
"""
