import sys

from tracelens.cli import main

sys.exit(main())
