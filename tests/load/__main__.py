"""`python -m tests.load` (what `make load` runs): see tests/load/loadgen.py."""

import sys

from tests.load.loadgen import main

sys.exit(main())
