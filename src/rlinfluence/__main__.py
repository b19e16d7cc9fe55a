from rlinfluence.console import main

main()
