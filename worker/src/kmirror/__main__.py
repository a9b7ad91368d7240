import sys

from kmirror.cli import main

sys.exit(main())
