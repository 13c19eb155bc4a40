import sys

from restarter.runtime.main import main

sys.exit(main())
