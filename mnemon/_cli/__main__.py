"""`python -m mnemon._cli`."""

from . import main

main()
