"""`python -m cari.cli`, the same as `cari`."""

import sys

from cari.cli import main

sys.exit(main())
