import sys

from kmirror.audit.job import main

sys.exit(main())
