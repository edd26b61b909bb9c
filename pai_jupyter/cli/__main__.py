"""python -m pai_jupyter.cli"""

from . import main

main()
