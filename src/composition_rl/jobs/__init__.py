"""The jobs: one module or package per ``crl`` command, named after it.

``commands/<name>.py`` parses the command line, calls the job here and prints; the map of
the layout is in CONTRIBUTING.md.
"""
