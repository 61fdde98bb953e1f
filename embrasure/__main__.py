from embrasure.cli.main import main

main()
