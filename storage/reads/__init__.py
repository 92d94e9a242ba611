"""Read-only questions the faces ask of the store, one module per reader: runs, agreement
arrays, items pages, the report, the viewer, the Python API's frames."""
