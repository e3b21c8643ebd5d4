"""`python -m hybridrag.cli`: the same command line as the `hybridrag` console script."""

from hybridrag.cli import main

main()
