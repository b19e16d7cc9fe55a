from rlinfluence.cli import main

main()
