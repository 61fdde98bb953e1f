from embrasure.cli import main

main()
