"""Entry script for launchers that start a Python file (msrun): ``mindrl`` with the arguments."""

import sys

from mindrl.cli import main

if __name__ == "__main__":
    sys.exit(main())
