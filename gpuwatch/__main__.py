import sys

from gpuwatch.cli.main import main

sys.exit(main())
