from tunelab.cli import main

raise SystemExit(main())
