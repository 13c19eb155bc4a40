import sys

from restarter.main import main

sys.exit(main())
