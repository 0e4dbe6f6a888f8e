"""``python -m tensorscope`` is the ``tensorscope`` command."""
from tensorscope.cli import main

raise SystemExit(main())
