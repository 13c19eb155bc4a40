import sys

from restarter_reference import main

sys.exit(main())
