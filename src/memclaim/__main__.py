import sys

from memclaim.cli.main import main

sys.exit(main())
