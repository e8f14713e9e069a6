"""Photos and digits: class folders and labels files, formats tf.io.decode_image does not read,
orientation by EXIF, augmentation, and the image records an image classifier reads. Imports
input_fns.records, input_fns.tables (a labels file is a table) and common.
"""
