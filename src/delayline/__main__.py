"""``python -m delayline``: the same as the ``delayline`` command."""

import sys

from delayline.cli import main

sys.exit(main())
