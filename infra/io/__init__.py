"""The I/O layer: stack files, the offline AWS snapshot, the provider's data sources, region names.

Only this layer reads files or asks AWS; the model and rules layers get what it reads as plain data.
"""
