import sys

from scalestudy.cli import main

sys.exit(main())
