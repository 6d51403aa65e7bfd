import sys

from mindrl.cli import main

sys.exit(main())
