import sys

from warden.cli.entry import main  # the hook fast path too: `python -m warden hook …` behaves as `warden hook …`

sys.exit(main())
