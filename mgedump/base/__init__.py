"""Base utilities every room stands on: errors and exit codes, text cleaning, logging, atomic files, resource
limits and optional dependencies. Nothing here imports the rest of the package."""
