"""``python -m attnlab.training PRESET ...``: train one course model (see :func:`attnlab.training.cli.main`)."""

from attnlab.training.cli import main

raise SystemExit(main())
