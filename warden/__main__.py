import sys

from warden.cli.app import main

sys.exit(main())
