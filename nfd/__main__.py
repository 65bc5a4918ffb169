from nfd.cli import main

raise SystemExit(main())
