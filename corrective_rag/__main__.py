"""``python3 -m corrective_rag ...`` is the ``corrective-rag`` command."""

import sys

from corrective_rag.cli.main import main

sys.exit(main())
